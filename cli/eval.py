"""`groundwork eval retrieval --dataset DIR`: BEIR-format retrieval evaluation."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(help="Evaluation.", no_args_is_help=True)

DEFAULT_TENANT = uuid.UUID("00000000-0000-0000-0000-000000000001")


@app.command()
def retrieval(
    dataset: Path = typer.Option(..., exists=True, file_okay=False, help="BEIR folder (corpus.jsonl, ...)."),
    modes: str = typer.Option("bm25,dense,hybrid", help="Comma-separated: bm25, dense, hybrid."),
    index_dims: str = typer.Option("", help="Matryoshka prefix dims to test dense at, e.g. 64,128,256,384."),
    rerank: str = typer.Option("", help="Also run hybrid + rerank: 'llm' or 'cross-encoder'."),
    rerank_model: str | None = typer.Option(None, help="Cross-encoder spec (path or hub id)."),
    rerank_candidates: int = typer.Option(30, help="Fused results given to the reranker."),
    split: str = typer.Option("test", help="qrels/<split>.tsv"),
    max_queries: int = typer.Option(0, help="Evaluate only the first N judged queries (0: all)."),
    collection: str | None = typer.Option(
        None, help="Reuse this collection (holding the corpus, source_id = corpus _id) instead of ingesting."
    ),
    output: Path = typer.Option(Path("retrieval-eval.json"), help="Where the JSON report goes."),
    keep: bool = typer.Option(False, help="Keep the throwaway collections."),
) -> None:
    """Ingest DIR's corpus into throwaway collections (one chunk per document; one collection per
    index dim) and print nDCG@10, Recall@10/100, MRR@10 and latency p50/p99 per mode."""
    # Heavy imports stay here, out of `groundwork --help`.
    from core.database import make_engine, make_session_factory
    from core.runtime import open_database
    from core.settings import get_settings
    from retrieval.backends import llm_backends, llm_url, start_local_engine
    from retrieval.beir import load_beir, mode_config, run_mode
    from retrieval.config import resolve_config
    from retrieval.pipeline import SearchPipeline

    settings = get_settings()
    data = load_beir(dataset, split)
    if max_queries:
        data.queries = dict(list(data.queries.items())[:max_queries])
        data.qrels = {q: data.qrels[q] for q in data.queries}
    base = resolve_config(settings.retrieval)
    if rerank:
        base.rerank = base.rerank.model_copy(
            update={"kind": rerank, "model": rerank_model, "candidates": rerank_candidates}
        )
    llm_engine = start_local_engine(settings) if rerank == "llm" and not llm_url(settings) else None
    chat, judge = llm_backends(settings, llm_engine)
    wanted = [m.strip() for m in modes.split(",") if m.strip()]
    sessions = make_session_factory(make_engine(open_database(settings).url))
    report: dict = {"dataset": str(dataset), "corpus": len(data.corpus), "queries": len(data.queries)}
    report["modes"] = {}
    with sessions() as session:
        targets = _collections(session, settings, data, dataset.name, index_dims, collection)
        for i, (col, several) in enumerate(targets):
            runs = [(m, False) for m in wanted if m == "dense" or i == 0]
            if i == 0 and rerank:
                runs.append(("hybrid", True))
            for mode, reranked in runs:
                label = mode + (f"@{col.index_dim}" if mode != "bm25" and several else "")
                label += f"+rerank-{rerank}" if reranked else ""
                pipeline = SearchPipeline(mode_config(base, mode, reranked), chat=chat, judge=judge)
                report["modes"][label] = run_mode(session, col, data, pipeline)
                typer.echo(f"{label}: {report['modes'][label]}")
        if collection is None and not keep:
            _drop(session, targets)
    if llm_engine is not None:
        llm_engine.shutdown()
    output.write_text(json.dumps(report, indent=2) + "\n")
    _print_table(report)
    typer.echo(f"report written to {output}")


def _collections(session, settings, data, name: str, index_dims: str, reuse: str | None) -> list:
    """[(collection, several dims?)]: the reused collection, or one fresh collection per dim."""
    from sqlalchemy import select

    from core.models import Collection
    from retrieval.beir import corpus_vectors, ingest
    from retrieval.corpus import create_collection
    from retrieval.embedding import get_embedder

    if reuse is not None:
        found = session.scalar(
            select(Collection).where(Collection.name == reuse, Collection.tenant_id == DEFAULT_TENANT)
        )
        if found is None:
            raise typer.BadParameter(f"no collection {reuse!r}", param_hint="--collection")
        return [(found, False)]
    embedder = get_embedder(settings.embedding_model)
    vectors = corpus_vectors(
        data, embedder.encode, settings.data_dir / "eval-cache", settings.embedding_model
    )
    dims = [int(d) for d in index_dims.split(",") if d] or [min(128, embedder.dim)]
    out = []
    for dim in dims:
        label = f"eval-{name}-{dim}-{uuid.uuid4().hex[:6]}"
        col = create_collection(session, DEFAULT_TENANT, label, settings.embedding_model, embedder.dim, dim)
        session.commit()
        ingest(session, col, data, vectors)
        out.append((col, len(dims) > 1))
    return out


def _drop(session, targets: list) -> None:
    from sqlalchemy import delete

    from core.models import Collection

    session.execute(delete(Collection).where(Collection.id.in_([c.id for c, _ in targets])))
    session.commit()


def _print_table(report: dict) -> None:
    table = Table(title=f"{report['dataset']} ({report['corpus']} docs, {report['queries']} queries)")
    columns = ["ndcg@10", "recall@10", "recall@100", "mrr@10", "latency_ms_p50", "latency_ms_p99"]
    table.add_column("mode")
    for col in columns:
        table.add_column(col, justify="right")
    for label, row in report["modes"].items():
        table.add_row(label, *(str(row[c]) for c in columns))
    Console().print(table)
