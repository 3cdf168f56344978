"""Document and job state transitions. Each function runs inside the caller's transaction.

Invariants (see README.md):
- a document row is locked (FOR UPDATE) before its job row: one lock order, no deadlock cycles;
- only the transaction that moves a document into `indexed` or `failed` bumps the job counters, so
  the counters are exact however often a message is delivered;
- a worker only writes a document it has claimed (`claimed_by` = its task id); a re-queue, cancel
  or re-upload takes the claim away and the late worker's results are dropped.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import case, delete, func, literal, select, update
from sqlalchemy.orm import Session

from core import durable
from core.models import Chunk, Collection, Document, DocumentStatus, IngestionJob, JobStatus

INDEXED = (DocumentStatus.indexed, DocumentStatus.indexed_with_warnings)
TERMINAL = (*INDEXED, DocumentStatus.failed)
IN_PROGRESS = (DocumentStatus.parsing, DocumentStatus.chunking, DocumentStatus.embedding)
JOB_OPEN = (JobStatus.queued, JobStatus.running)


class Superseded(Exception):
    """The document is no longer ours to write (re-queued, cancelled, re-uploaded or deleted)."""


@dataclass(frozen=True)
class Claim:
    document_id: uuid.UUID
    job_id: uuid.UUID
    collection_id: uuid.UUID
    task_id: str
    blob_key: str | None
    content_hash: str
    filename: str
    embedding_model: str
    embedding_dim: int
    chunking: dict


def db_now(session: Session) -> datetime:
    return session.execute(select(func.now())).scalar_one()


def _locked_document(session: Session, document_id: uuid.UUID) -> Document | None:
    return session.get(Document, document_id, with_for_update=True, populate_existing=True)


def worker_lost(attempts: int, stage: str) -> str:
    return (
        f"worker_lost: the worker processing this document died {attempts} times (last in {stage}); "
        "it is not tried again (a file that kills its worker)"
    )


def claim_all(
    session: Session,
    job_id: uuid.UUID,
    document_ids: list[uuid.UUID],
    task_id: str,
    stale_after_s: float,
    max_attempts: int | None = None,
) -> list[Claim]:
    """Take the documents for this task; those with nothing to do are left out, and those whose
    worker died `max_attempts` times are failed (`worker_lost`) instead of tried again.

    NOTE: documents are locked in id order and the job row last, the lock order of every writer
    (the documents failed here lock the job after every document).
    """
    now = db_now(session)
    lost: list[tuple[Document, str]] = []
    claims = [
        c
        for d in sorted(set(document_ids))
        if (c := _claim(session, d, job_id, task_id, stale_after_s, now, max_attempts, lost))
    ]
    for doc, stage in lost:
        fail_document(session, doc.id, worker_lost(doc.attempts, stage))
    if claims:
        session.execute(
            update(IngestionJob)
            .where(IngestionJob.id == job_id)
            .values(
                heartbeat_at=now,
                # The first claim is when the job started (created_at is when it was queued).
                stages=case(
                    (IngestionJob.stages.has_key("started_at"), IngestionJob.stages),
                    else_=IngestionJob.stages.op("||")(
                        func.jsonb_build_object("started_at", now.isoformat())
                    ),
                ),
                status=case(
                    (
                        IngestionJob.status == JobStatus.queued,
                        literal(JobStatus.running, IngestionJob.status.type),
                    ),
                    else_=IngestionJob.status,
                ),
            )
        )
    return claims


def _claim(
    session: Session,
    document_id: uuid.UUID,
    job_id: uuid.UUID,
    task_id: str,
    stale_after_s: float,
    now: datetime,
    max_attempts: int | None,
    lost: list[tuple[Document, str]],
) -> Claim | None:
    doc = _locked_document(session, document_id)
    if doc is None or doc.job_id != job_id or doc.status in TERMINAL:
        return None  # deleted, superseded by a newer upload, or already done: an idempotent no-op
    if doc.status in IN_PROGRESS and doc.claimed_by != task_id:
        alive = doc.heartbeat_at is not None and now - doc.heartbeat_at < timedelta(seconds=stale_after_s)
        if alive:
            return None  # a live worker has it; if it dies, recovery re-queues it
    # NOTE: our own message again while the document is mid-way under our claim: the process that
    # ran it died (acks_late + reject_on_worker_lost redeliver the message at once). That counts
    # as an attempt, or a file that kills its worker would be redelivered forever.
    if doc.claimed_by != task_id or doc.status in IN_PROGRESS:
        doc.attempts += 1
    if max_attempts is not None and doc.attempts > max_attempts:
        lost.append((doc, str(doc.status)))
        return None
    doc.status, doc.claimed_by, doc.heartbeat_at = DocumentStatus.parsing, task_id, now
    collection = session.get(Collection, doc.collection_id)
    return Claim(
        document_id=doc.id,
        job_id=job_id,
        collection_id=doc.collection_id,
        task_id=task_id,
        blob_key=doc.blob_key,
        content_hash=doc.content_hash,
        filename=str(doc.metadata_.get("filename") or doc.source_id),
        embedding_model=collection.embedding_model,
        embedding_dim=collection.embedding_dim,
        chunking=dict(collection.chunking or {}),
    )


def release_for_retry(session: Session, document_ids: list[uuid.UUID], task_id: str) -> None:
    """The task retries after a transient error: its documents go back to queued under its claim,
    so the retry is not taken for a dead worker's redelivery (see `_claim`)."""
    session.execute(
        update(Document)
        .where(Document.id.in_(document_ids), Document.claimed_by == task_id)
        .where(Document.status.in_(IN_PROGRESS))
        .values(status=DocumentStatus.queued)
    )


def still_claimed(session: Session, claims: list[Claim]) -> set[uuid.UUID]:
    """The claimed documents still ours (a cancel, delete or re-upload takes them away)."""
    if not claims:
        return set()
    rows = session.execute(
        select(Document.id)
        .where(Document.id.in_([c.document_id for c in claims]), Document.claimed_by == claims[0].task_id)
        .where(Document.status.in_(IN_PROGRESS))
    )
    return set(rows.scalars())


def set_stage(session: Session, claims: list[Claim], status: DocumentStatus) -> set[uuid.UUID]:
    """Move the claimed documents to `status`; returns the ids still ours (the others are superseded)."""
    if not claims:
        return set()
    ids = [c.document_id for c in claims]
    return durable.beat(session, Document, ids, claims[0].task_id, IN_PROGRESS, status=status)


def heartbeat(session: Session, claims: list[Claim]) -> None:
    """All claims of one task: same task id."""
    durable.beat(session, Document, [c.document_id for c in claims], claims[0].task_id)
    session.execute(
        update(IngestionJob)
        .where(IngestionJob.id.in_({c.job_id for c in claims}))
        .values(heartbeat_at=func.now())
    )


def bump_job(
    session: Session,
    job_id: uuid.UUID,
    *,
    done: int = 0,
    failed: int = 0,
    embedded: int = 0,
    stage_seconds: dict[str, float] | None = None,
    reused: int = 0,
) -> None:
    """Add to the job's counters and close it when every document is terminal."""
    job = session.get(IngestionJob, job_id, with_for_update=True, populate_existing=True)
    if job is None:
        return
    job.documents_done += done
    job.documents_failed += failed
    job.chunks_embedded += embedded
    stages = dict(job.stages or {})
    for stage, seconds in (stage_seconds or {}).items():
        stages[f"{stage}_s"] = round(stages.get(f"{stage}_s", 0.0) + seconds, 4)
    stages["chunks_reused"] = stages.get("chunks_reused", 0) + reused
    job.stages = _embedding_moved(stages, -embedded, -embedded) if embedded else stages
    job.heartbeat_at = func.now()
    _close_if_finished(job)


def note_embedding(session: Session, job_id: uuid.UUID, sent: int, planned: int) -> None:
    """Live embedding progress: `planned` more chunks to send to the model, `sent` more sent.

    `stages.embedding_sent` of `stages.embedding_planned` are the chunks of groups still embedding
    (every task of the job adds to them); a stored document moves its chunks from these to
    `chunks_embedded` in its store transaction (bump_job), so their sum never jumps back."""
    job = session.get(IngestionJob, job_id, with_for_update=True, populate_existing=True)
    if job is None:
        return
    job.stages = _embedding_moved(dict(job.stages or {}), sent, planned)
    job.heartbeat_at = func.now()


def _embedding_moved(stages: dict, sent: int, planned: int) -> dict:
    for key, delta in (("embedding_sent", sent), ("embedding_planned", planned)):
        stages[key] = max(0, stages.get(key, 0) + delta)
    return stages


def release_from_job(session: Session, doc: Document) -> None:
    """The unfinished document leaves its job (re-uploaded into another, or deleted): the job stops
    waiting for it, so it can still finish."""
    if doc.job_id is None or doc.status in TERMINAL:
        return
    job = session.get(IngestionJob, doc.job_id, with_for_update=True, populate_existing=True)
    if job is None:
        return
    job.documents_total -= 1
    job.stages = {**(job.stages or {}), "superseded": (job.stages or {}).get("superseded", 0) + 1}
    _close_if_finished(job)


def _close_if_finished(job: IngestionJob) -> None:
    if job.status in JOB_OPEN and job.documents_done + job.documents_failed >= job.documents_total:
        job.status = (
            JobStatus.succeeded if job.documents_done > 0 or job.documents_total == 0 else JobStatus.failed
        )


def fail_document(session: Session, document_id: uuid.UUID, reason: str, task_id: str | None = None) -> bool:
    """Mark failed (dropping any older version's chunks); False if it was not ours to fail."""
    doc = _locked_document(session, document_id)
    if doc is None or doc.status in TERMINAL:
        return False
    if task_id is not None and doc.claimed_by != task_id:
        return False
    session.execute(delete(Chunk).where(Chunk.document_id == doc.id))
    doc.status, doc.error, doc.claimed_by, doc.heartbeat_at = DocumentStatus.failed, reason, None, None
    if doc.job_id is not None:
        bump_job(session, doc.job_id, failed=1)
    return True


def lock_for_store(session: Session, claim: Claim) -> tuple[Document, Collection]:
    """Lock the claimed document and share-lock its collection (index_dim cannot change under us)."""
    doc = _locked_document(session, claim.document_id)
    if (
        doc is None
        or doc.claimed_by != claim.task_id
        or doc.job_id != claim.job_id
        or doc.content_hash != claim.content_hash
        or doc.status not in IN_PROGRESS
    ):
        raise Superseded(str(claim.document_id))
    collection = session.execute(
        select(Collection).where(Collection.id == doc.collection_id).with_for_update(read=True)
    ).scalar_one()
    return doc, collection


def requeue_documents(
    session: Session, job_id: uuid.UUID, document_ids: list[uuid.UUID] | None = None
) -> list[uuid.UUID]:
    """Put every document of the job that is not indexed (or only those of `document_ids`) back in
    the queue; the ids to send."""
    query = select(Document).where(Document.job_id == job_id, Document.status.not_in(INDEXED))
    if document_ids is not None:
        query = query.where(Document.id.in_(document_ids))
    docs = session.execute(query.order_by(Document.created_at).with_for_update()).scalars().all()
    job = session.get(IngestionJob, job_id, with_for_update=True, populate_existing=True)
    was_failed = sum(1 for d in docs if d.status == DocumentStatus.failed)
    for doc in docs:
        doc.status, doc.error, doc.claimed_by, doc.heartbeat_at, doc.attempts = (
            DocumentStatus.queued,
            None,
            None,
            None,
            0,
        )
    job.documents_failed -= was_failed
    job.attempts += 1
    job.error = None
    job.heartbeat_at = func.now()
    if docs:
        job.status = JobStatus.queued
    return [d.id for d in docs]


def cancel_job(session: Session, job_id: uuid.UUID, reason: str = "cancelled") -> int:
    """Fail every unfinished document of the job and mark it cancelled; returns how many."""
    docs = (
        session.execute(
            select(Document)
            .where(Document.job_id == job_id, Document.status.not_in(TERMINAL))
            .with_for_update()
        )
        .scalars()
        .all()
    )
    for doc in docs:
        session.execute(delete(Chunk).where(Chunk.document_id == doc.id))
        doc.status, doc.error, doc.claimed_by, doc.heartbeat_at = DocumentStatus.failed, reason, None, None
    job = session.get(IngestionJob, job_id, with_for_update=True, populate_existing=True)
    job.documents_failed += len(docs)
    job.status = JobStatus.cancelled
    return len(docs)
