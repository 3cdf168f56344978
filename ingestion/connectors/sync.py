"""One sync of a connector: list the source, fetch what is new or changed (an item whose version
matches the stored one is not even fetched), hand those bytes to the upload path as one ingestion
job (dedup, versioning and chunk-level embedding reuse as for uploads), delete the documents of
items that left the source, and record the counts in the sync's history row.

A source that cannot be listed fails the sync and deletes nothing; nor does a listing that comes
back empty while documents exist (a site that is down must not empty the collection).
"""

from __future__ import annotations

import io
import logging
import time
import uuid
from collections import Counter
from datetime import timedelta

from celery import Celery
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from core.connector_models import Connector, ConnectorSync, SyncStatus
from core.database import session_scope
from core.models import Collection, Document, DocumentStatus
from core.settings import Settings
from ingestion.blobs import BlobStore
from ingestion.connectors.base import SourceError
from ingestion.connectors.config import build_connector
from ingestion.state import release_from_job
from ingestion.uploads import Upload, create_batch, send_job

SYNC_TASK = "groundwork.connectors.sync"
OPEN = (SyncStatus.queued, SyncStatus.running)
log = logging.getLogger(__name__)


def open_sync(
    session: Session, connector: Connector, trigger: str, stale_after_s: float
) -> ConnectorSync | None:
    """A new queued sync of `connector`, or None if one is already open. Open syncs older than
    `stale_after_s` (their worker died) are failed first."""
    now = session.execute(select(func.now())).scalar_one()
    open_rows = session.execute(
        select(ConnectorSync).where(
            ConnectorSync.connector_id == connector.id, ConnectorSync.status.in_(OPEN)
        )
    ).scalars()
    busy = False
    for row in open_rows:
        if row.created_at < now - timedelta(seconds=stale_after_s):
            row.status, row.error, row.finished_at = (
                SyncStatus.failed,
                "abandoned: the sync never finished",
                now,
            )
        else:
            busy = True
    if busy:
        return None
    sync = ConnectorSync(
        connector_id=connector.id,
        collection_id=connector.collection_id,
        trigger=trigger,
        status=SyncStatus.queued,
    )
    sync.added = sync.changed = sync.removed = sync.unchanged = sync.failed = 0
    sync.details = {}
    session.add(sync)
    session.flush()
    return sync


def send_sync(celery: Celery, settings: Settings, sync_id: uuid.UUID) -> None:
    limit = settings.connectors.sync_time_limit_s
    celery.send_task(
        SYNC_TASK,
        args=[str(sync_id)],
        queue=settings.celery_queue,
        soft_time_limit=limit,
        time_limit=limit + 60,
    )


def _connector_documents(
    session: Session, collection_id: uuid.UUID, connector_id: uuid.UUID
) -> dict[str, Document]:
    docs = session.execute(
        select(Document)
        .where(Document.collection_id == collection_id)
        .where(Document.metadata_["connector_id"].astext == str(connector_id))
    ).scalars()
    return {d.source_id: d for d in docs}


def _remove(session: Session, docs: list[Document]) -> list[str]:
    """Delete the documents (chunks cascade); the blob keys to delete after commit."""
    keys = []
    for doc in docs:
        session.refresh(doc, with_for_update=True)
        if doc.blob_key:
            keys.append(doc.blob_key)
        release_from_job(session, doc)
        session.delete(doc)
    return keys


def run_sync(settings: Settings, sessions: sessionmaker[Session], celery: Celery, sync_id: uuid.UUID) -> str:
    """Run a queued sync; returns its final status (or "skipped" if it was not queued)."""
    with session_scope(sessions) as session:
        sync = session.get(ConnectorSync, sync_id, with_for_update=True)
        if sync is None or sync.status != SyncStatus.queued:
            return "skipped"  # a duplicate delivery, or failed as abandoned meanwhile
        connector = session.get(Connector, sync.connector_id)
        sync.status, sync.started_at = SyncStatus.running, func.now()
        kind, config, connector_id = connector.kind, dict(connector.config), connector.id
        collection_id = connector.collection_id
        known = {
            sid: (d.metadata_.get("connector_version"), d.status)
            for sid, d in _connector_documents(session, collection_id, connector_id).items()
        }
    blobs = BlobStore.for_data_dir(settings.data_dir)
    max_bytes = int(settings.ingestion.max_file_mb * 1e6)
    counts: Counter[str] = Counter()
    details: dict = {}
    uploads: list[Upload] = []
    started = time.monotonic()
    try:
        seen: set[str] = set()
        source = build_connector(kind, config, settings, str(connector_id))
        try:
            for item in source.list_items():
                seen.add(item.id)
                version, status = known.get(item.id, (None, None))
                if version == item.version and status != DocumentStatus.failed:
                    counts["unchanged"] += 1
                    continue
                try:
                    data = source.fetch(item)
                except Exception as exc:
                    counts["failed"] += 1
                    details.setdefault("fetch_failed", []).append(
                        f"{item.id} ({type(exc).__name__}: {exc})"[:300]
                    )
                    continue
                metadata = {
                    **item.metadata,
                    "connector_id": str(connector_id),
                    "connector_version": item.version,
                }
                if item.acl:
                    metadata["acl"] = item.acl
                if item.title:
                    metadata["title"] = item.title
                staged = blobs.put_stream(io.BytesIO(data), max_bytes)
                uploads.append(Upload(item.filename, source_id=item.id, metadata=metadata, staged=staged))
            state = source.state()
            details.update(source.details())
        finally:
            source.close()
        gone = [sid for sid in known if sid not in seen]
        if not seen and known:
            raise SourceError("the source listed no items; nothing was removed (is it down?)")
        _finish(
            settings,
            sessions,
            celery,
            blobs,
            sync_id,
            collection_id,
            uploads,
            gone,
            counts,
            details,
            state,
            time.monotonic() - started,
        )
        return SyncStatus.succeeded.value
    except SourceError as exc:
        _fail(sessions, blobs, sync_id, uploads, str(exc), details)
    except Exception:
        log.exception("sync %s failed", sync_id)
        _fail(
            sessions,
            blobs,
            sync_id,
            uploads,
            "internal_error: the sync failed (details in the worker's log)",
            details,
        )
    return SyncStatus.failed.value


def _finish(
    settings, sessions, celery, blobs, sync_id, collection_id, uploads, gone, counts, details, state, seconds
) -> None:
    with session_scope(sessions) as session:
        collection = session.get(Collection, collection_id)
        batch = create_batch(session, blobs, collection, uploads, int(settings.ingestion.max_file_mb * 1e6))
        for outcome in batch.outcomes:
            if outcome.status == "queued":
                counts["added" if outcome.version == 1 else "changed"] += 1
            elif outcome.status == "failed":
                counts["failed"] += 1
            else:  # unchanged bytes under a new version tag, or a duplicate of another item
                counts["unchanged"] += 1
                if outcome.status == "duplicate":
                    details.setdefault("duplicates", []).append(f"{outcome.source_id} ({outcome.reason})")
        docs = (
            session.execute(
                select(Document).where(Document.collection_id == collection_id, Document.source_id.in_(gone))
            )
            .scalars()
            .all()
            if gone
            else []
        )
        removed_keys = _remove(session, docs)
        counts["removed"] += len(docs)
        sync = session.get(ConnectorSync, sync_id, with_for_update=True)
        for name in ("added", "changed", "removed", "unchanged", "failed"):
            setattr(sync, name, counts[name])
        sync.job_id = batch.job.id if batch.job.documents_total else None
        sync.details = {
            **{k: v[:50] if isinstance(v, list) else v for k, v in details.items()},
            "seconds": round(seconds, 3),
        }
        sync.status, sync.finished_at = SyncStatus.succeeded, func.now()
        connector = session.get(Connector, sync.connector_id)
        connector.state, connector.last_sync_at = state, func.now()
    for key in [*batch.stale_blobs, *removed_keys]:
        blobs.delete(key)
    if batch.queued:
        send_job(celery, sessions, settings, batch.job.id, batch.queued, batch.sizes)


def _fail(sessions, blobs, sync_id, uploads, reason: str, details: dict) -> None:
    for upload in uploads:
        blobs.delete(upload.staged.key)
    with session_scope(sessions) as session:
        sync = session.get(ConnectorSync, sync_id, with_for_update=True)
        sync.status, sync.error, sync.finished_at = SyncStatus.failed, reason[:2000], func.now()
        sync.details = details
