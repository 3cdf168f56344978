"""State transitions and recovery against the real database (no worker needed)."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import func, select, text, update

from core.database import session_scope
from core.models import Chunk, Collection, Document, IngestionJob
from ingestion import state
from ingestion.blobs import BlobStore
from ingestion.collections import CollectionConflict, build_prefix_index, change_index_dim, check_model_change
from ingestion.pipeline import PipelineContext, process_documents
from ingestion.recovery import find_stuck
from ingestion.uploads import Upload, create_batch
from retrieval.embedding import prefix_index_name

pytestmark = pytest.mark.integration


def _batch(settings, session_factory, collection_id, files: dict[str, bytes]):
    with session_scope(session_factory) as session:
        collection = session.get(Collection, collection_id)
        uploads = [Upload(name, data) for name, data in files.items()]
        batch = create_batch(session, BlobStore.for_data_dir(settings.data_dir), collection, uploads, 10**6)
        return batch.job.id, batch.queued, batch.outcomes


def _get(session_factory, model, key):
    with session_scope(session_factory) as session:
        return session.get(model, key)


def _age(session_factory, document_id, seconds: int) -> None:
    with session_scope(session_factory) as session:
        session.execute(
            update(Document)
            .where(Document.id == document_id)
            .values(heartbeat_at=func.now() - text(f"interval '{seconds} seconds'"))
        )


def test_claims_are_exclusive_and_dead_workers_are_recovered(settings, session_factory, make_collection):
    collection_id = make_collection()
    job_id, (doc_id,), _ = _batch(settings, session_factory, collection_id, {"a.txt": b"alpha beta"})
    with session_scope(session_factory) as session:
        assert state.claim_all(session, job_id, [doc_id], "task-1", stale_after_s=60) != []
    with session_scope(session_factory) as session:  # a duplicate delivery while task-1 lives
        assert state.claim_all(session, job_id, [doc_id], "task-2", stale_after_s=60) == []
    assert _get(session_factory, IngestionJob, job_id).status == "running"

    _age(session_factory, doc_id, 120)  # task-1's worker died
    with session_scope(session_factory) as session:
        assert find_stuck(session, stale_after_s=60, max_attempts=2) == [(doc_id, job_id)]
    doc = _get(session_factory, Document, doc_id)
    assert (doc.status, doc.claimed_by, doc.attempts) == ("queued", None, 1)

    with session_scope(session_factory) as session:
        assert state.claim_all(session, job_id, [doc_id], "task-3", stale_after_s=60) != []
    _age(session_factory, doc_id, 120)  # died again: second attempt, the limit
    with session_scope(session_factory) as session:
        assert find_stuck(session, stale_after_s=60, max_attempts=2) == []
    doc = _get(session_factory, Document, doc_id)
    assert doc.status == "failed" and "died 2 times" in doc.error
    job = _get(session_factory, IngestionJob, job_id)
    assert (job.status, job.documents_failed) == ("failed", 1)


def test_lost_messages_are_resent_only_when_workers_are_silent(settings, session_factory, make_collection):
    collection_id = make_collection()
    job_id, queued, _ = _batch(settings, session_factory, collection_id, {"b.txt": b"one", "c.txt": b"two"})
    with session_scope(session_factory) as session:
        assert find_stuck(session, stale_after_s=60, max_attempts=3) == []  # just queued: wait
    with session_scope(session_factory) as session:
        session.execute(
            update(IngestionJob)
            .where(IngestionJob.status.in_(state.JOB_OPEN))
            .values(created_at=func.now() - text("interval '1 hour'"), heartbeat_at=None)
        )
    with session_scope(session_factory) as session:
        resent = find_stuck(session, stale_after_s=60, max_attempts=3)
    assert sorted(d for d, j in resent if j == job_id) == sorted(queued)
    with session_scope(session_factory) as session:  # the job's heartbeat was bumped: no storm
        assert find_stuck(session, stale_after_s=60, max_attempts=3) == []


def test_requeue_cancel_and_reupload_keep_counters_exact(settings, session_factory, make_collection):
    collection_id = make_collection()
    job_id, (d1, d2), _ = _batch(
        settings, session_factory, collection_id, {"x.txt": b"x one", "y.txt": b"y two"}
    )
    with session_scope(session_factory) as session:
        assert state.fail_document(session, d1, "boom")
        assert not state.fail_document(session, d1, "again")  # terminal: counted once
    with session_scope(session_factory) as session:
        assert sorted(state.requeue_documents(session, job_id)) == sorted([d1, d2])
    job = _get(session_factory, IngestionJob, job_id)
    assert (job.status, job.documents_failed, job.attempts) == ("queued", 0, 1)

    # Re-uploading y.txt (changed) moves it to a new job; the old job stops waiting for it.
    new_job, (moved,), _ = _batch(settings, session_factory, collection_id, {"y.txt": b"y changed"})
    assert moved == d2
    assert _get(session_factory, IngestionJob, job_id).documents_total == 1
    assert _get(session_factory, Document, d2).version == 2
    with session_scope(session_factory) as session:
        assert state.cancel_job(session, job_id) == 1
    job = _get(session_factory, IngestionJob, job_id)
    assert (job.status, job.documents_failed, job.documents_total) == ("cancelled", 1, 1)
    assert _get(session_factory, Document, d1).error == "cancelled"
    assert _get(session_factory, IngestionJob, new_job).status == "queued"


def test_dedup_outcomes(settings, session_factory, make_collection):
    collection_id = make_collection()
    _, queued, outcomes = _batch(
        settings, session_factory, collection_id, {"p.txt": b"same", "q.txt": b"same"}
    )
    assert [o.status for o in outcomes] == ["queued", "duplicate"] and len(queued) == 1
    _, queued, outcomes = _batch(settings, session_factory, collection_id, {"p.txt": b"same"})
    assert [o.status for o in outcomes] == ["unchanged"] and queued == []


def test_index_dim_change_rebuilds_from_stored_vectors(
    settings, session_factory, make_collection, retrieval_models
):
    collection_id = make_collection(strategy="fixed", chunk_size=32, chunk_overlap=0)
    job_id, (doc_id,), _ = _batch(
        settings, session_factory, collection_id, {"d.txt": b"Ducks paddle on the pond. " * 20}
    )
    ctx = PipelineContext.create(settings, session_factory, retrieval_models)
    assert process_documents(ctx, job_id, [doc_id], "task-x") == {doc_id: "indexed"}
    with session_scope(session_factory) as session:
        collection = session.get(Collection, collection_id)
        before = (
            session.execute(
                select(Chunk.embedding).where(Chunk.collection_id == collection_id).order_by(Chunk.ordinal)
            )
            .scalars()
            .all()
        )
        assert change_index_dim(session, collection, 32) == len(before)
    build_prefix_index(session_factory.kw["bind"], collection_id, 32)
    with session_scope(session_factory) as session:
        rows = session.execute(
            select(Chunk.embedding, Chunk.embedding_prefix)
            .where(Chunk.collection_id == collection_id)
            .order_by(Chunk.ordinal)
        ).all()
        indexdef = session.execute(
            text("SELECT indexdef FROM pg_indexes WHERE indexname = :n"),
            {"n": prefix_index_name(collection_id)},
        ).scalar_one()
        with pytest.raises(CollectionConflict):
            check_model_change(
                session, session.get(Collection, collection_id), "some/other-model", retrieval_models
            )
    assert "vector(32)" in indexdef and str(collection_id) in indexdef
    for full, prefix in rows:
        assert len(prefix) == 32
        head = np.asarray(full[:32])
        np.testing.assert_allclose(np.asarray(prefix), head / np.linalg.norm(head), atol=1e-5)
    assert [list(r.embedding) for r in rows] == [list(e) for e in before]  # not re-embedded
