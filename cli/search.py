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

    from api.deps import DEFAULT_TENANT_ID
    from core.errors import ClientError
    from core.settings import get_settings
    from retrieval.filters import SearchFilters
    from retrieval.service import SearchRequest
    from usecases.platform import build_platform
    from usecases.search import search_in_collection

    filters = SearchFilters(
        metadata=_parse_filters(filter_), document_ids=[uuid.UUID(d) for d in document] or None
    )
    request = SearchRequest(
        query=query, mode=mode, top_k=top_k, rerank=rerank, transform=transform, filters=filters, debug=debug
    )
    platform = build_platform(get_settings())
    try:
        _, result = asyncio.run(search_in_collection(platform, DEFAULT_TENANT_ID, collection, request))
    except ClientError as exc:
        typer.echo(exc.message, err=True)
        raise typer.Exit(1) from None
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
