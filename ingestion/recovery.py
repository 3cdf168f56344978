"""Stuck-job recovery. Every worker runs `reaper` (a core.durable.Recovery) in its main process,
once at start-up and then every `ingestion.recovery_interval_s`:

1. a claimed document whose heartbeat is older than `stale_after_s` lost its worker (SIGKILL, OOM,
   host gone): it goes back to `queued` and a new message is sent, or it fails once it has been
   claimed `max_attempts` times (a file that keeps killing workers must not loop forever);
2. queued documents of a job whose messages never reached the broker (the API crashed or the
   broker refused between commit and send: `enqueued_at` is still unset after `outbox_grace_s`)
   are sent, and the job marked sent (a transactional outbox, with the job row as the outbox);
3. queued documents while *every* worker has been silent for `stale_after_s` mean lost messages
   (broker restart): their messages are sent again.

Duplicate messages are harmless: a task whose document is terminal, or claimed by a live worker,
does nothing (ingestion/state.py).
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta

from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session, sessionmaker

from core import durable
from core.database import session_scope
from core.models import Document, DocumentStatus, IngestionJob
from ingestion import state
from ingestion.uploads import mark_sent

log = logging.getLogger(__name__)


def find_unsent(session: Session, grace_s: float) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Queued documents of open jobs whose messages were never sent (see `enqueued_at`)."""
    cutoff = state.db_now(session) - timedelta(seconds=grace_s)
    unsent = select(IngestionJob.id).where(
        IngestionJob.status.in_(state.JOB_OPEN),
        IngestionJob.enqueued_at.is_(None),
        IngestionJob.updated_at < cutoff,
    )
    rows = session.execute(
        select(Document.id, Document.job_id)
        .where(Document.job_id.in_(unsent), Document.status == DocumentStatus.queued)
        .with_for_update(skip_locked=True)
    ).all()
    if rows:
        log.warning("sending %d queued documents whose enqueue failed", len(rows))
    return [(d, j) for d, j in rows]


def find_stuck(
    session: Session, stale_after_s: float, max_attempts: int
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Re-queue or fail what dead workers left; returns (document id, job id) pairs to send."""
    now = state.db_now(session)
    cutoff = now - timedelta(seconds=stale_after_s)
    dead = durable.find_stalled(session, Document, state.IN_PROGRESS, stale_after_s)
    resend: list[tuple[uuid.UUID, uuid.UUID]] = []
    for doc in dead:
        if doc.attempts >= max_attempts:
            state.fail_document(session, doc.id, state.worker_lost(doc.attempts, str(doc.status)))
            continue
        log.warning(
            "re-queueing document %s of job %s: its worker stopped (%s)", doc.id, doc.job_id, doc.status
        )
        doc.status, doc.claimed_by, doc.heartbeat_at = DocumentStatus.queued, None, None
        resend.append((doc.id, doc.job_id))
    last_beat = session.execute(
        select(func.max(IngestionJob.heartbeat_at)).where(IngestionJob.status.in_(state.JOB_OPEN))
    ).scalar()
    if last_beat is None or last_beat < cutoff:
        jobs = select(IngestionJob.id).where(
            IngestionJob.status.in_(state.JOB_OPEN),
            func.coalesce(IngestionJob.heartbeat_at, IngestionJob.created_at) < cutoff,
        )
        queued = session.execute(
            select(Document.id, Document.job_id)
            .where(Document.job_id.in_(jobs), Document.status == DocumentStatus.queued)
            .with_for_update(skip_locked=True)
        ).all()
        if queued:
            log.warning(
                "re-sending %d queued documents: no worker has made progress for a while", len(queued)
            )
            resend.extend((d, j) for d, j in queued if (d, j) not in resend)
            job_ids = {j for _, j in queued}
            session.execute(update(IngestionJob).where(IngestionJob.id.in_(job_ids)).values(heartbeat_at=now))
    return resend


def recover(
    sessions: sessionmaker[Session],
    send,
    stale_after_s: float,
    max_attempts: int,
    outbox_grace_s: float = 15.0,
) -> int:
    """One recovery pass; `send(job_id, document_ids)` enqueues. Returns documents re-sent."""
    with session_scope(sessions) as session:
        unsent = find_unsent(session, outbox_grace_s)
        resend = find_stuck(session, stale_after_s, max_attempts)
    resend += [pair for pair in unsent if pair not in resend]
    by_job: dict[uuid.UUID, list[uuid.UUID]] = {}
    for document_id, job_id in resend:
        by_job.setdefault(job_id, []).append(document_id)
    for job_id, document_ids in by_job.items():
        send(job_id, document_ids)
    if unsent:
        mark_sent(sessions, list({job_id for _, job_id in unsent}))
    return len(resend)


def purge_broker_rows(sessions: sessionmaker[Session], max_age_s: float) -> int:
    """Delete delivered messages of kombu's SQLAlchemy transport (kombu never does) and old task
    results; returns rows deleted. Without those tables (Redis broker and backend) nothing happens."""
    deleted = 0
    with session_scope(sessions) as session:
        listed = session.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'"))
        tables = set(listed.scalars())
        older = "now() - CAST(:age AS interval)"
        cutoff = {"age": f"{int(max_age_s)} seconds"}
        if "kombu_message" in tables:
            purge = f"DELETE FROM kombu_message WHERE visible = false AND timestamp < {older}"
            deleted += session.execute(text(purge), cutoff).rowcount
        if "celery_taskmeta" in tables:
            purge = f"DELETE FROM celery_taskmeta WHERE date_done < {older}"
            deleted += session.execute(text(purge), cutoff).rowcount
    return deleted


def reaper(sessions: sessionmaker[Session], send, settings) -> durable.Recovery:
    """The worker's recovery thread: a pass at start-up (what the last worker left), then every
    `ingestion.recovery_interval_s`."""
    knobs = settings.ingestion
    passes = [
        (
            "stuck ingestion",
            lambda: recover(sessions, send, knobs.stale_after_s, knobs.max_attempts, knobs.outbox_grace_s),
        ),
        ("broker rows", lambda: purge_broker_rows(sessions, knobs.broker_rows_max_age_s)),
    ]
    return durable.Recovery("ingest-reaper", passes, knobs.recovery_interval_s)
