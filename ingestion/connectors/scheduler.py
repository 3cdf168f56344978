"""Scheduled re-sync without Celery beat: each worker's main process runs this thread (as it runs
the reaper), which opens a sync for every enabled connector whose `next_sync_at` has passed and
sends it to the queue. It needs no extra process and works on any broker, the database one of
`groundwork up` included. Several workers are safe: the due rows are taken FOR UPDATE SKIP LOCKED
and moved to their next time in the same transaction, and a connector has one open sync at most.
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

from celery import Celery
from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session, sessionmaker

from core.connector_models import Connector
from core.database import session_scope
from core.settings import Settings
from ingestion.connectors.sync import open_sync, send_sync

log = logging.getLogger(__name__)


def schedule_due(sessions: sessionmaker[Session], celery: Celery, settings: Settings, limit: int = 50) -> int:
    """Open and send the syncs that are due; returns how many were sent."""
    with session_scope(sessions) as session:
        now = session.execute(select(func.now())).scalar_one()
        due = (
            session.execute(
                select(Connector)
                .where(Connector.enabled, Connector.interval_s.is_not(None))
                .where(or_(Connector.next_sync_at.is_(None), Connector.next_sync_at <= now))
                .order_by(Connector.next_sync_at.nulls_first())
                .limit(limit)
                .with_for_update(skip_locked=True)
            )
            .scalars()
            .all()
        )
        opened = []
        for connector in due:
            connector.next_sync_at = now + timedelta(seconds=connector.interval_s)
            sync = open_sync(session, connector, "schedule", settings.connectors.sync_time_limit_s)
            if sync is not None:
                opened.append(sync.id)
    for sync_id in opened:
        send_sync(celery, settings, sync_id)
    return len(opened)


class SyncScheduler:
    def __init__(self, sessions: sessionmaker[Session], celery: Celery, settings: Settings) -> None:
        self._sessions, self._celery, self._settings = sessions, celery, settings
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="connector-scheduler", daemon=True)

    def _run(self) -> None:
        while not self._stopping.wait(self._settings.connectors.scheduler_tick_s):
            try:
                schedule_due(self._sessions, self._celery, self._settings)
            except Exception:  # the next tick tries again
                log.warning("connector scheduling failed", exc_info=True)

    def start(self) -> SyncScheduler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)
