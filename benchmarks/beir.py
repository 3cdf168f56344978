"""A BEIR dataset (loaded by evals/datasets.py) in a benchmark: corpus embeddings cached on disk,
one chunk per document, one pipeline run over every judged query."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from sqlalchemy.orm import Session

from core.models import Collection
from evals.datasets import BeirDataset, doc_text
from evals.metrics import retrieval_metrics
from retrieval.corpus import add_documents
from retrieval.pipeline import SearchPipeline


def corpus_vectors(
    dataset: BeirDataset, encode: Callable[[list[str]], np.ndarray], cache_dir: Path | None, model: str
) -> np.ndarray:
    """The corpus' embeddings, cached on disk by (model, corpus content): encoding is the slow part."""
    digest = hashlib.sha256(model.encode())
    for doc in dataset.corpus:
        digest.update(doc.source_id.encode() + b"\0" + doc_text(doc).encode() + b"\0")
    path = cache_dir / f"{digest.hexdigest()[:24]}.npy" if cache_dir else None
    if path is not None and path.exists():
        return np.load(path)
    vectors = encode([doc_text(d) for d in dataset.corpus])
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, vectors)
    return vectors


def ingest(session: Session, collection: Collection, dataset: BeirDataset, vectors: np.ndarray) -> None:
    """One chunk per corpus document, committed in batches."""
    for lo in range(0, len(dataset.corpus), 2000):
        add_documents(session, collection, dataset.corpus[lo : lo + 2000], vectors[lo : lo + 2000])
        session.commit()


def run_mode(
    session: Session, collection: Collection, dataset: BeirDataset, pipeline: SearchPipeline
) -> dict:
    """Metrics and per-query latency of one pipeline over every judged query (evaluation runs do the
    same per item, see evals/)."""
    runs: dict[str, list[str]] = {}
    latencies: list[float] = []
    for qid, query in dataset.queries.items():
        start = time.perf_counter()
        result = asyncio.run(pipeline.run(session, collection, query))
        latencies.append((time.perf_counter() - start) * 1000)
        runs[qid] = [r.source_id for r in result.results]
        session.rollback()
    metrics = retrieval_metrics(runs, dataset.qrels)
    return {
        **{k: round(v, 4) for k, v in metrics.items()},
        "latency_ms_p50": round(float(np.percentile(latencies, 50)), 2),
        "latency_ms_p99": round(float(np.percentile(latencies, 99)), 2),
        "queries": len(runs),
    }
