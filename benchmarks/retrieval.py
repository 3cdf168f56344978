"""Retrieval latency and ANN recall at scale: `python -m benchmarks.retrieval [--chunks 100000]`.

Writes benchmarks/results/retrieval.json and prints a table. The corpus is synthetic but shaped
like text: Zipf-Mandelbrot-distributed words in 60-word chunks, and clustered 384-dim unit vectors (query
vectors are perturbed chunk vectors). Query embedding is not timed here (the vectors are given);
its cost for the packaged model is measured separately as `embed_query_ms`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table
from sqlalchemy import delete

from core.database import make_engine, make_session_factory
from core.models import Collection
from core.runtime import open_database
from core.settings import get_settings
from core.settings.retrieval import BM25Config, DenseConfig, FusionConfig, RetrievalConfig
from retrieval.corpus import CorpusDoc, add_documents, build_prefix_index, create_collection
from retrieval.dense import DenseRetriever
from retrieval.models import RetrievalModels
from retrieval.pipeline import SearchPipeline

DEFAULT_TENANT = uuid.UUID("00000000-0000-0000-0000-000000000001")
DIM, INDEX_DIM = 384, 128
RESULTS = Path(__file__).parent / "results" / "retrieval.json"


def make_words(rng: np.random.Generator, n: int) -> list[str]:
    syllables = [
        "ka",
        "lo",
        "mi",
        "ne",
        "su",
        "ta",
        "ri",
        "po",
        "ve",
        "da",
        "qu",
        "zo",
        "fe",
        "gu",
        "hi",
        "bra",
    ]
    words = {"".join(rng.choice(syllables, size=rng.integers(2, 5))) for _ in range(n * 2)}
    return sorted(words)[:n]


def make_corpus(rng: np.random.Generator, n: int, vocab: list[str]) -> tuple[list[CorpusDoc], np.ndarray]:
    # Zipf-Mandelbrot, 1/(rank + 100): the shape of text once stop words are gone (the commonest
    # term is in ~10% of chunks, as in MS MARCO after stop-word removal); plain Zipf would put the
    # top terms in every chunk, which the english analyzer never indexes.
    ranks = np.arange(1, len(vocab) + 1)
    probs = (1 / (ranks + 100)) / (1 / (ranks + 100)).sum()
    words = rng.choice(len(vocab), size=(n, 60), p=probs)
    docs = [CorpusDoc(f"bench-{i}", " ".join(vocab[w] for w in row)) for i, row in enumerate(words)]
    centroids = rng.standard_normal((max(1, n // 200), DIM)).astype(np.float32)
    vectors = centroids[rng.integers(0, len(centroids), n)] + 0.9 * rng.standard_normal((n, DIM)).astype(
        np.float32
    )
    return docs, vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


# Hybrid settings timed beside the defaults (benchmarks/fusion.py measures their quality).
HYBRID_VARIANTS = {
    "hybrid before (rrf, 100 each)": RetrievalConfig(
        bm25=BM25Config(candidates=100), dense=DenseConfig(candidates=100), fusion=FusionConfig(method="rrf")
    ),
    "hybrid rrf, 1000 each": RetrievalConfig(
        bm25=BM25Config(candidates=1000),
        dense=DenseConfig(candidates=1000, overfetch=1),
        fusion=FusionConfig(method="rrf"),
    ),
    "hybrid convex, bm25 1000 + dense 100": RetrievalConfig(
        bm25=BM25Config(candidates=1000),
        dense=DenseConfig(candidates=100),
        fusion=FusionConfig(method="convex"),
    ),
    "hybrid convex, 300 each": RetrievalConfig(
        bm25=BM25Config(candidates=300),
        dense=DenseConfig(candidates=300, overfetch=2),
        fusion=FusionConfig(method="convex"),
    ),
}


def percentile(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 2)


def build(engine, sessions, n: int, seed: int) -> tuple[Collection, list[CorpusDoc], np.ndarray]:
    rng = np.random.default_rng(seed)
    docs, vectors = make_corpus(rng, n, make_words(rng, 30_000))
    with sessions() as s:
        collection = create_collection(
            s, DEFAULT_TENANT, f"bench-{uuid.uuid4().hex[:8]}", "synthetic", DIM, INDEX_DIM
        )
        s.commit()
    build_prefix_index(engine, collection.id, INDEX_DIM)
    start = time.perf_counter()
    for lo in range(0, n, 5000):  # one transaction per batch, as ingestion writes them
        with sessions() as s:
            add_documents(s, collection, docs[lo : lo + 5000], vectors[lo : lo + 5000])
            s.commit()
    print(f"wrote {n} chunks in {time.perf_counter() - start:.0f} s")
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        # NOTE: index-only scans of the postings need the visibility map that VACUUM sets.
        conn.exec_driver_sql("VACUUM ANALYZE chunks")
        conn.exec_driver_sql("VACUUM ANALYZE bm25_postings")
    return collection, docs, vectors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="Keep the benchmark collection afterwards.")
    args = parser.parse_args()

    settings = get_settings()
    database = open_database(settings)
    engine = make_engine(database.url)
    sessions = make_session_factory(engine)
    collection, docs, vectors = build(engine, sessions, args.chunks, args.seed)
    rng = np.random.default_rng(args.seed + 1)
    picks = rng.integers(0, len(docs), args.queries)
    queries = [" ".join(rng.choice(docs[i].text.split(), size=3, replace=False)) for i in picks]
    qvecs = vectors[picks] + 0.5 * rng.standard_normal((args.queries, DIM)).astype(np.float32) / np.sqrt(DIM)
    qvecs = qvecs / np.linalg.norm(qvecs, axis=1, keepdims=True)
    by_text = dict(zip(queries, qvecs, strict=True))

    class Precomputed(RetrievalModels):
        """The synthetic corpus's query vectors in place of an embedding model."""

        def encode(self, spec: str, texts: list[str]) -> np.ndarray:
            return np.stack([by_text[t] for t in texts])

    latencies: dict[str, list[float]] = {}
    recall: list[float] = []
    configs = {m: RetrievalConfig(mode=m) for m in ("bm25", "dense", "hybrid")} | HYBRID_VARIANTS
    with sessions() as s:
        for label, config in configs.items():
            pipeline = SearchPipeline(config.model_copy(update={"top_k": 10}), Precomputed())
            asyncio.run(pipeline.run(s, collection, queries[0]))  # warm caches
            times = []
            for q in queries:
                t = time.perf_counter()
                asyncio.run(pipeline.run(s, collection, q))
                times.append((time.perf_counter() - t) * 1000)
                s.rollback()
            latencies[label] = times
        ann, exact = DenseRetriever(DenseConfig()), DenseRetriever(DenseConfig(exact=True))
        latencies["dense_exact_scan"] = []
        for v in qvecs:
            approx_ids = [h.chunk_id for h in ann.run(s, collection.id, INDEX_DIM, v, top_k=10)]
            t = time.perf_counter()
            exact_ids = [h.chunk_id for h in exact.run(s, collection.id, INDEX_DIM, v, top_k=10)]
            latencies["dense_exact_scan"].append((time.perf_counter() - t) * 1000)
            recall.append(len(set(approx_ids) & set(exact_ids)) / 10)
            s.rollback()
        if not args.keep:
            s.execute(delete(Collection).where(Collection.id == collection.id))
            s.commit()

    import torch

    # NOTE: one intra-op thread: for one short query, more threads only add OpenMP hand-offs (on
    # this shared 2-core machine, 2 threads measured 5-10x slower than 1).
    torch.set_num_threads(1)

    embedder = RetrievalModels().embedder(settings.embedding_model)
    embedder.encode(["warm up"])
    embed_ms = []
    for q in queries[:50]:
        t = time.perf_counter()
        embedder.encode([q])
        embed_ms.append((time.perf_counter() - t) * 1000)

    report = {
        "chunks": args.chunks,
        "queries": args.queries,
        "index_dim": INDEX_DIM,
        "defaults": RetrievalConfig().model_dump(include={"bm25", "dense", "fusion"}),
        "latency_ms": {m: {"p50": percentile(v, 50), "p99": percentile(v, 99)} for m, v in latencies.items()},
        "recall@10_ann_vs_exact": round(float(np.mean(recall)), 4),
        "embed_query_ms": {"p50": percentile(embed_ms, 50), "p99": percentile(embed_ms, 99)},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    table = Table(title=f"retrieval at {args.chunks} chunks ({args.queries} queries, top 10)")
    for col in ("mode", "p50 ms", "p99 ms"):
        table.add_column(col)
    for mode, lat in report["latency_ms"].items():
        table.add_row(mode, str(lat["p50"]), str(lat["p99"]))
    table.add_row(
        "embed query (MiniLM)", str(report["embed_query_ms"]["p50"]), str(report["embed_query_ms"]["p99"])
    )
    console = Console()
    console.print(table)
    console.print(
        f"recall@10 of HNSW-prefix + re-score vs exact full-dimension: {report['recall@10_ann_vs_exact']}"
    )


if __name__ == "__main__":
    main()
