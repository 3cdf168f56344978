"""`groundwork search COLLECTION QUERY`: search a collection from the command line."""

from __future__ import annotations

import json
import uuid

import typer


def _parse_filters(values: list[str]) -> dict:
    metadata: dict[str, list[str]] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"--filter expects key=value, got {item!r}")
        metadata.setdefault(key, []).append(value)
    return {k: v[0] if len(v) == 1 else v for k, v in metadata.items()}


def search(
    collection: str = typer.Argument(..., help="Collection name or id (of the default tenant)."),
    query: str = typer.Argument(..., help="What to search for."),
    mode: str | None = typer.Option(None, help="bm25, dense or hybrid (default: the collection's)."),
    top_k: int | None = typer.Option(None, "--top-k", "-k", help="Results to return."),
    rerank: bool | None = typer.Option(
        None, "--rerank/--no-rerank", help="Override the collection's reranking."
    ),
    transform: str | None = typer.Option(None, help="none, hyde or multi_query."),
    filter_: list[str] = typer.Option([], "--filter", help="Metadata key=value (repeatable)."),
    document: list[str] = typer.Option([], help="Only this document id (repeatable)."),
    as_json: bool = typer.Option(False, "--json", help="Print the full response as JSON."),
    debug: bool = typer.Option(False, help="Include each stage's ranking and timings."),
) -> None:
    """Search COLLECTION for QUERY and print the best chunks with their provenance."""
    import asyncio

    from sqlalchemy import select

    from core.models import Collection
    from core.settings import get_settings
    from retrieval.backends import llm_backends, needs_local_engine
    from retrieval.filters import SearchFilters
    from retrieval.service import SearchRequest, request_config
    from retrieval.service import search as run_search
    from usecases.platform import build_platform

    platform = build_platform(get_settings())
    settings = platform.settings
    tenant = uuid.UUID("00000000-0000-0000-0000-000000000001")
    filters = SearchFilters(
        metadata=_parse_filters(filter_), document_ids=[uuid.UUID(d) for d in document] or None
    )
    request = SearchRequest(
        query=query, mode=mode, top_k=top_k, rerank=rerank, transform=transform, filters=filters, debug=debug
    )
    with platform.sessions() as session:
        try:
            where = Collection.id == uuid.UUID(collection)
        except ValueError:
            where = Collection.name == collection
        found = session.scalar(select(Collection).where(where, Collection.tenant_id == tenant))
        if found is None:
            typer.echo(f"no collection {collection!r}", err=True)
            raise typer.Exit(1)
        config = request_config(settings.retrieval, found, request)
        engine = platform.llm.local_engine() if needs_local_engine(settings, config) else None
        chat, judge = llm_backends(settings, engine)
        try:
            result = asyncio.run(
                run_search(session, settings.retrieval, found, request, chat=chat, judge=judge)
            )
        finally:
            platform.close()
    if as_json:
        payload = {"results": [vars(r) for r in result.results], "debug": result.debug or None}
        typer.echo(json.dumps(payload, default=str, indent=2))
        return
    for i, r in enumerate(result.results, start=1):
        where_ = (
            f"{r.source_id}"
            + (f" p.{r.page}" if r.page is not None else "")
            + f" [{r.char_start}:{r.char_end}]"
        )
        scores = " ".join(f"{k}={v:.4f}" for k, v in r.scores.items())
        typer.echo(f"{i:>2}. {where_}  {scores}")
        typer.echo("    " + " ".join(r.text.split())[:300])
    if debug:
        typer.echo(json.dumps(result.debug, default=str, indent=2))
