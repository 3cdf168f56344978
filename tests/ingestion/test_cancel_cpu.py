"""A job cancelled or a document deleted while a large document is embedded or chunked: the real
worker's processes stop using CPU within 10 s (issue 28: a cancelled 10 MB text kept a core busy
until the 600 s time limit). CPU is read from /proc (psutil) over the worker and its children.

`-s` prints the figures: seconds from the cancel (or delete) to the first quiet second."""

from __future__ import annotations

import time

import psutil
import pytest

from core.database import session_scope
from core.models import Collection, Document, IngestionJob
from ingestion import state
from ingestion.blobs import BlobStore
from ingestion.celery_app import create_celery
from ingestion.uploads import Upload, create_batch, enqueue
from tests.ingestion.test_state import _get
from tests.support.services import WorkerProcess, unique_name, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LIMIT_S = 10.0


@pytest.fixture
def worker(broker_settings, database_url, tmp_path, session_factory, make_collection):
    """A worker of its own (one process), killed afterwards: a failing case leaves it busy. It has
    indexed a small document, so its model is loaded before the test's document arrives."""
    settings = broker_settings.model_copy(update={"celery_queue": unique_name("gwq_cancel")})
    app = create_celery(settings, database_url)
    process = WorkerProcess(settings, database_url, tmp_path / "worker.log")
    process.start()
    try:
        process.wait_ready(app, timeout=120)
        job_id, _ = _start((settings, app, process), session_factory, make_collection(), _sentences(3))
        wait_until(
            lambda: _get(session_factory, IngestionJob, job_id).status == "succeeded", 120, message="warm-up"
        )
        yield settings, app, process
    finally:
        process.kill()


def _sentences(n: int) -> bytes:
    """Distinct sentences (no chunk text repeats, so nothing is re-used instead of embedded)."""
    return " ".join(f"Sentence {i} says harbour {i * 7919 % 10007} moved cargo." for i in range(n)).encode()


def _start(worker, session_factory, collection_id, data: bytes):
    settings, app, _ = worker
    with session_scope(session_factory) as session:
        collection = session.get(Collection, collection_id)
        blobs = BlobStore.for_data_dir(settings.data_dir)
        batch = create_batch(session, blobs, collection, [Upload("big.txt", data)], 10**8)
        job_id, (doc_id,) = batch.job.id, batch.queued
    enqueue(app, settings, job_id, [doc_id])
    return job_id, doc_id


def _cpu_seconds(root: psutil.Process) -> float:
    total = 0.0
    for process in [root, *root.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def _seconds_to_idle(process: WorkerProcess, since: float, timeout: float = 45, window: float = 1.0) -> float:
    """Seconds from `since` to the start of the first `window` in which the worker used < 10% of a core."""
    root = psutil.Process(process.proc.pid)
    used, at = _cpu_seconds(root), time.monotonic()
    while at - since < timeout:
        time.sleep(window)
        now_used, now = _cpu_seconds(root), time.monotonic()
        if now_used - used < 0.1 * (now - at):
            return at - since
        used, at = now_used, now
    raise AssertionError(f"the worker still used CPU {timeout:.0f} s after the cancel:\n{process.log_tail()}")


def test_a_cancel_while_embedding_stops_the_worker_within_10_s(worker, session_factory, make_collection):
    job_id, doc_id = _start(worker, session_factory, make_collection(), _sentences(20_000))
    # once the first embedding group is done (about 1,900 chunks in all: minutes of embedding left)
    wait_until(
        lambda: _get(session_factory, IngestionJob, job_id).stages.get("embedding_sent", 0) > 0,
        240,
        message="the first embedding group",
    )
    with session_scope(session_factory) as session:
        assert state.cancel_job(session, job_id) == 1
    cancelled = time.monotonic()
    seconds = _seconds_to_idle(worker[2], cancelled)
    print(f"\ncancel while embedding: worker idle {seconds:.1f} s after the cancel")
    assert seconds < LIMIT_S
    doc = _get(session_factory, Document, doc_id)
    assert (doc.status, doc.error) == ("failed", "cancelled")


def test_a_delete_while_semantic_chunking_stops_the_worker_within_10_s(
    worker, session_factory, make_collection
):
    """Semantic chunking embeds every sentence of the segment (20,000 here) before any cut."""
    collection_id = make_collection(strategy="semantic")
    job_id, doc_id = _start(worker, session_factory, collection_id, _sentences(20_000))
    wait_until(lambda: _get(session_factory, Document, doc_id).status == "chunking", 240, message="chunking")
    time.sleep(3.0)  # past the word index, into the sentence embeddings
    with session_scope(session_factory) as session:  # what DELETE /v1/documents/{id} does
        doc = session.get(Document, doc_id, with_for_update=True)
        state.release_from_job(session, doc)
        session.delete(doc)
    deleted = time.monotonic()
    seconds = _seconds_to_idle(worker[2], deleted)
    print(f"\ndelete while semantic chunking: worker idle {seconds:.1f} s after the delete")
    assert seconds < LIMIT_S
    assert _get(session_factory, IngestionJob, job_id).status == "succeeded"  # nothing left to wait for
