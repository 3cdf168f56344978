"""Bounds per document against the real database and the packaged embedder: a document whose
worker died is quarantined (`worker_lost` after one retry), a cancel stops the embedding between
groups (and the job counts the chunks embedded after each group), a parsed text past the cap fails
with a reason."""

from __future__ import annotations

import pytest

from core.database import session_scope
from core.models import Document, IngestionJob
from ingestion import state
from ingestion.pipeline import PipelineContext, process_documents
from tests.ingestion.test_state import _batch, _get

pytestmark = pytest.mark.integration


def test_a_document_whose_worker_died_twice_is_quarantined_not_redelivered_forever(
    settings, session_factory, make_collection, retrieval_models
):
    job_id, (doc_id,), _ = _batch(settings, session_factory, make_collection(), {"k.txt": b"kill me"})
    claim = {"stale_after_s": 600, "max_attempts": 2}
    with session_scope(session_factory) as session:  # first delivery
        assert state.claim_all(session, job_id, [doc_id], "task-1", **claim)
    with session_scope(session_factory) as session:  # a transient retry of the same message
        state.release_for_retry(session, [doc_id], "task-1")
    with session_scope(session_factory) as session:
        assert state.claim_all(session, job_id, [doc_id], "task-1", **claim)
    assert _get(session_factory, Document, doc_id).attempts == 1  # a retry is not a death
    # the worker is killed mid-way: acks_late redelivers the same message at once, document still mid-way
    with session_scope(session_factory) as session:
        assert state.claim_all(session, job_id, [doc_id], "task-1", **claim)  # the one retry
    with session_scope(session_factory) as session:
        assert state.claim_all(session, job_id, [doc_id], "task-1", **claim) == []  # killed again
    doc = _get(session_factory, Document, doc_id)
    assert doc.status == "failed" and doc.error.startswith("worker_lost:"), doc.error
    job = _get(session_factory, IngestionJob, job_id)
    assert (job.status, job.documents_failed) == ("failed", 1)
    with session_scope(session_factory) as session:  # any later delivery is a no-op
        assert state.claim_all(session, job_id, [doc_id], "task-1", **claim) == []


class _Watched:
    """The packaged embedder, calling `before(texts)` ahead of each encode."""

    def __init__(self, embedder, before) -> None:
        self.embedder, self.before = embedder, before

    def __getattr__(self, name):
        return getattr(self.embedder, name)

    def encode(self, texts, batch_size=None, between=None):
        self.before(texts)
        return self.embedder.encode(texts, batch_size, between)


def _grouped(settings, session_factory, group: int, before, retrieval_models) -> PipelineContext:
    small = settings.model_copy(
        update={"ingestion": settings.ingestion.model_copy(update={"embed_group": group})}
    )
    ctx = PipelineContext.create(small, session_factory, retrieval_models)
    real = ctx.embedder_for
    ctx.embedder_for = lambda spec: _Watched(real(spec), before)
    return ctx


def test_a_cancel_stops_the_embedding_between_groups(
    settings, session_factory, make_collection, retrieval_models
):
    text = " ".join(f"Sentence {i} about rivers and forests." for i in range(3000)).encode()
    job_id, (doc_id,), _ = _batch(
        settings, session_factory, make_collection(chunk_size=32, chunk_overlap=4), {"big.txt": text}
    )
    encoded: list[int] = []

    def cancel_in_the_first_group(texts) -> None:
        if encoded == [] and len(texts) == 16:
            with session_scope(session_factory) as session:
                state.cancel_job(session, job_id)
        encoded.append(len(texts))

    ctx = _grouped(settings, session_factory, 16, cancel_in_the_first_group, retrieval_models)
    assert process_documents(ctx, job_id, [doc_id], "task-c") == {doc_id: "superseded"}
    groups = [n for n in encoded if n == 16]
    assert len(groups) == 1, encoded  # stopped right after the group it was cancelled in
    doc = _get(session_factory, Document, doc_id)
    assert doc.status == "failed" and doc.error == "cancelled"
    stages = _get(session_factory, IngestionJob, job_id).stages  # the live counts were withdrawn
    assert stages["embedding_sent"] == stages["embedding_planned"] == 0, stages


def test_the_job_counts_the_chunks_embedded_after_each_group(
    settings, session_factory, make_collection, retrieval_models
):
    text = " ".join(f"Line {i} on tides and harbours." for i in range(600)).encode()
    job_id, (doc_id,), _ = _batch(
        settings, session_factory, make_collection(chunk_size=32, chunk_overlap=4), {"tides.txt": text}
    )
    seen: list[tuple[int, int]] = []  # (sent, planned) in the job as each group starts

    def look(texts) -> None:
        stages = _get(session_factory, IngestionJob, job_id).stages
        if "embedding_planned" in stages:  # (not a call before the embedding stage)
            seen.append((stages["embedding_sent"], stages["embedding_planned"]))

    ctx = _grouped(settings, session_factory, 16, look, retrieval_models)
    assert process_documents(ctx, job_id, [doc_id], "task-p") == {doc_id: "indexed"}
    planned = seen[0][1]
    assert planned > 3 * 16 and seen == [(sent, planned) for sent in range(0, planned, 16)], seen
    job = _get(session_factory, IngestionJob, job_id)  # stored: the count moved to chunks_embedded
    assert job.chunks_embedded == planned
    assert job.stages["embedding_sent"] == job.stages["embedding_planned"] == 0, job.stages


def test_a_parsed_text_past_the_cap_fails_with_a_reason(
    settings, session_factory, make_collection, retrieval_models
):
    job_id, (doc_id,), _ = _batch(settings, session_factory, make_collection(), {"long.txt": b"word " * 100})
    capped = settings.model_copy(
        update={"ingestion": settings.ingestion.model_copy(update={"max_parsed_chars": 100})}
    )
    ctx = PipelineContext.create(capped, session_factory, retrieval_models)
    assert process_documents(ctx, job_id, [doc_id], "task-t") == {doc_id: "failed"}
    assert _get(session_factory, Document, doc_id).error.startswith("text_too_large:")
