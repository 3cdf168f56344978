"""Accepting an upload batch: dedup, durable bytes, one job, then the messages.

NOTE: the order is the durability invariant: bytes are fsynced to the blob store, then the job and
its documents are committed, and only then are messages sent. A crash before the commit leaves
orphan blobs (harmless); a crash between commit and send leaves queued documents that recovery
re-sends (ingestion/recovery.py).
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from dataclasses import dataclass, field

from celery import Celery
from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from core.database import session_scope
from core.models import Chunk, Collection, Document, DocumentStatus, IngestionJob, JobStatus
from core.settings import Settings
from core.tracing import inject_headers
from ingestion.blobs import BlobStore, Staged
from ingestion.state import IN_PROGRESS, release_from_job

INGEST_TASK = "groundwork.ingest.documents"
log = logging.getLogger(__name__)


@dataclass
class Upload:
    filename: str
    data: bytes = b""
    source_id: str | None = None
    metadata: dict = field(default_factory=dict)
    size: int | None = None  # the real size when `data` was cut at the limit
    # The API streams uploads into the blob store first (BlobStore.put_stream); `data` is then empty.
    staged: Staged | None = None

    def __post_init__(self) -> None:
        if self.staged is not None:
            self.size = max(self.size or 0, self.staged.size)
        self.size = self.size or len(self.data)

    @property
    def digest(self) -> str:
        return self.staged.digest if self.staged else hashlib.sha256(self.data).hexdigest()

    @property
    def blank(self) -> bool:
        return self.staged.blank if self.staged else not self.data.strip()


@dataclass
class UploadOutcome:
    filename: str
    source_id: str
    status: str  # queued, unchanged, duplicate, failed
    document_id: uuid.UUID | None = None
    version: int | None = None
    reason: str | None = None


@dataclass
class Batch:
    job: IngestionJob
    outcomes: list[UploadOutcome]
    queued: list[uuid.UUID]
    sizes: list[int]  # bytes of each queued document, for grouping into task messages
    stale_blobs: list[str]  # delete after commit


def _live_duplicate(
    session: Session, collection_id: uuid.UUID, digest: str, source_id: str
) -> Document | None:
    return session.execute(
        select(Document)
        .where(Document.collection_id == collection_id, Document.content_hash == digest)
        .where(Document.source_id != source_id, Document.status != DocumentStatus.failed)
        .limit(1)
    ).scalar_one_or_none()


def create_batch(
    session: Session, blobs: BlobStore, collection: Collection, uploads: list[Upload], max_bytes: int
) -> Batch:
    """Create the job and its documents in the caller's transaction (commit, then `enqueue`)."""
    job = IngestionJob(collection_id=collection.id, status=JobStatus.queued, stages={})
    job.documents_total = job.documents_done = job.documents_failed = job.chunks_embedded = job.attempts = 0
    session.add(job)
    session.flush()
    batch = Batch(job, [], [], [], [])
    last_of_source = {(u.source_id or u.filename): i for i, u in enumerate(uploads)}
    for i, upload in enumerate(uploads):
        source_id = upload.source_id or upload.filename
        if last_of_source[source_id] != i:
            _discard_staged(batch, upload)
            batch.outcomes.append(
                UploadOutcome(
                    upload.filename,
                    source_id,
                    "duplicate",
                    reason="a later file in this upload has the same source id",
                )
            )
            continue
        batch.outcomes.append(_accept(session, blobs, collection, job, batch, upload, source_id, max_bytes))
    if job.documents_total == 0 or job.documents_failed == job.documents_total:
        job.status = JobStatus.succeeded if job.documents_total == 0 else JobStatus.failed
    return batch


def _accept(
    session: Session,
    blobs: BlobStore,
    collection: Collection,
    job: IngestionJob,
    batch: Batch,
    upload: Upload,
    source_id: str,
    max_bytes: int,
) -> UploadOutcome:
    digest = upload.digest
    doc = session.execute(
        select(Document)
        .where(Document.collection_id == collection.id, Document.source_id == source_id)
        .with_for_update()
    ).scalar_one_or_none()
    too_large, empty = upload.size > max_bytes, upload.blank
    if doc is not None and doc.content_hash == digest and doc.status != DocumentStatus.failed:
        _discard_staged(batch, upload)
        return UploadOutcome(upload.filename, source_id, "unchanged", doc.id, doc.version)
    # NOTE: empty files are not deduplicated: each one is reported as what it is.
    duplicate = None if empty or too_large else _live_duplicate(session, collection.id, digest, source_id)
    if duplicate is not None:
        _discard_staged(batch, upload)
        return UploadOutcome(
            upload.filename,
            source_id,
            "duplicate",
            duplicate.id,
            reason=f"same content as {duplicate.source_id!r}",
        )
    if doc is None:
        doc = Document(collection_id=collection.id, source_id=source_id, version=1, attempts=0)
        session.add(doc)
    else:
        # A new version: the old chunks stay searchable until the new ones replace them atomically.
        # An in-flight worker still reading the old bytes deletes them itself when it sees it lost.
        if doc.blob_key and doc.status not in IN_PROGRESS:
            batch.stale_blobs.append(doc.blob_key)
        release_from_job(session, doc)
        doc.version += 1
    doc.title = str(upload.metadata.get("title", ""))[:1000]  # else the parser's, at store
    doc.content_hash, doc.size_bytes, doc.job_id = digest, upload.size, job.id
    doc.metadata_ = {**upload.metadata, "filename": upload.filename}
    doc.claimed_by, doc.heartbeat_at, doc.attempts, doc.error = None, None, 0, None
    job.documents_total += 1
    if too_large or empty:
        # NOTE: rejected here, before storing the bytes, yet reported like any failed document.
        _discard_staged(batch, upload)
        doc.status, doc.blob_key = DocumentStatus.failed, None
        session.execute(delete(Chunk).where(Chunk.document_id == doc.id))
        doc.error = (
            f"file_too_large: file too large: {upload.size / 1e6:.1f} MB, "
            f"over the {max_bytes / 1e6:.1f} MB limit"
            if too_large
            else "empty_file: empty file"
        )
        job.documents_failed += 1
        session.flush()
        return UploadOutcome(upload.filename, source_id, "failed", doc.id, doc.version, doc.error)
    key = upload.staged.key if upload.staged else blobs.put(upload.data)
    doc.status, doc.blob_key = DocumentStatus.queued, key
    session.flush()
    batch.queued.append(doc.id)
    batch.sizes.append(upload.size)
    return UploadOutcome(upload.filename, source_id, "queued", doc.id, doc.version)


def send_job(
    celery: Celery,
    sessions: sessionmaker[Session],
    settings: Settings,
    job_id: uuid.UUID,
    document_ids: list[uuid.UUID],
    sizes: list[int] | None = None,
) -> bool:
    """Enqueue the committed job's documents and mark the job sent (its outbox flag). A broker
    failure is logged and swallowed: the job stays unsent and the reaper sends it later, so the
    caller (an upload that already committed) still succeeds."""
    try:
        enqueue(celery, settings, job_id, document_ids, sizes)
    except Exception:
        log.warning("job %s: enqueue failed; the reaper will send it", job_id, exc_info=True)
        return False
    mark_sent(sessions, [job_id])
    return True


def mark_sent(sessions: sessionmaker[Session], job_ids: list[uuid.UUID]) -> None:
    with session_scope(sessions) as session:
        session.execute(
            update(IngestionJob).where(IngestionJob.id.in_(job_ids)).values(enqueued_at=func.now())
        )


def _discard_staged(batch: Batch, upload: Upload) -> None:
    if upload.staged is not None and upload.staged.key is not None:
        batch.stale_blobs.append(upload.staged.key)


def enqueue(
    celery: Celery,
    settings: Settings,
    job_id: uuid.UUID,
    document_ids: list[uuid.UUID],
    sizes: list[int] | None = None,
) -> int:
    """Send the job's documents in groups of `docs_per_task` (and `task_bytes`); returns messages sent.

    Messages carry ids only: (job id, [document ids]).
    """
    knobs = settings.ingestion
    groups: list[list[uuid.UUID]] = []
    weight = 0
    for i, document_id in enumerate(document_ids):
        size = sizes[i] if sizes else 0
        if (
            not groups
            or len(groups[-1]) >= knobs.docs_per_task
            or (weight + size > knobs.task_bytes and weight)
        ):
            groups.append([])
            weight = 0
        groups[-1].append(document_id)
        weight += size
    for group in groups:
        celery.send_task(
            INGEST_TASK,
            args=[str(job_id), [str(d) for d in group]],
            queue=settings.celery_queue,
            headers=inject_headers(),  # the worker's spans join the upload's trace
        )
    return len(groups)
