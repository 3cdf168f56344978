"""BEIR-format evaluation: corpus.jsonl, queries.jsonl, qrels/<split>.tsv -> metrics per mode."""

from __future__ import annotations

import asyncio
import csv
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sqlalchemy.orm import Session

from core.models import Collection
from retrieval.corpus import CorpusDoc, add_documents
from retrieval.metrics import evaluate
from retrieval.pipeline import SearchPipeline


@dataclass
class BeirDataset:
    corpus: list[CorpusDoc]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def _jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_beir(folder: Path, split: str = "test") -> BeirDataset:
    corpus = [
        CorpusDoc(str(row["_id"]), row.get("text", ""), row.get("title", "") or "", row.get("metadata") or {})
        for row in _jsonl(folder / "corpus.jsonl")
    ]
    qrels: dict[str, dict[str, int]] = {}
    with (folder / "qrels" / f"{split}.tsv").open(encoding="utf-8") as fh:
        reader = csv.reader(fh, delimiter="\t")
        for row in reader:
            if len(row) < 3 or not row[2].lstrip("-").isdigit():
                continue  # header
            qrels.setdefault(row[0], {})[row[1]] = int(row[2])
    queries = {str(r["_id"]): r["text"] for r in _jsonl(folder / "queries.jsonl") if str(r["_id"]) in qrels}
    return BeirDataset(corpus, queries, {q: j for q, j in qrels.items() if q in queries})


def doc_text(doc: CorpusDoc) -> str:
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


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
    """Metrics and per-query latency of one pipeline over every judged query (benchmarks/fusion.py;
    evaluation runs do the same per item, see evals/)."""
    runs: dict[str, list[str]] = {}
    latencies: list[float] = []
    for qid, query in dataset.queries.items():
        start = time.perf_counter()
        result = asyncio.run(pipeline.run(session, collection, query))
        latencies.append((time.perf_counter() - start) * 1000)
        runs[qid] = [r.source_id for r in result.results]
        session.rollback()
    metrics = evaluate(runs, dataset.qrels)
    return {
        **{k: round(v, 4) for k, v in metrics.items()},
        "latency_ms_p50": round(float(np.percentile(latencies, 50)), 2),
        "latency_ms_p99": round(float(np.percentile(latencies, 99)), 2),
        "queries": len(runs),
    }
