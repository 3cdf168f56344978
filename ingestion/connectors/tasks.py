"""Celery side of the connectors: the sync task, and the scheduler thread each worker starts."""

from __future__ import annotations

import uuid

from celery import current_app, shared_task
from celery.signals import worker_ready, worker_shutdown

from core.database import make_engine, make_session_factory
from ingestion.connectors.scheduler import SyncScheduler
from ingestion.connectors.sync import SYNC_TASK, run_sync
from ingestion.tasks import _context


@shared_task(bind=True, name=SYNC_TASK, acks_late=True)
def sync_connector(self, sync_id: str) -> str:
    ctx = _context(self.app)
    return run_sync(ctx.settings, ctx.sessions, self.app, uuid.UUID(sync_id))


@worker_ready.connect
def _start_scheduler(sender=None, **_) -> None:
    app = getattr(sender, "app", None) or current_app
    settings = app.conf.get("groundwork_settings")
    if settings is None or settings.connectors.scheduler_tick_s <= 0:
        return
    sessions = make_session_factory(make_engine(app.conf.groundwork_database_url))
    # Kept on the worker's app (the main process's), stopped with it.
    app.groundwork_sync_scheduler = SyncScheduler(sessions, app, settings).start()


@worker_shutdown.connect
def _stop_scheduler(sender=None, **_) -> None:
    app = getattr(sender, "app", None) or current_app
    scheduler: SyncScheduler | None = getattr(app, "groundwork_sync_scheduler", None)
    if scheduler is not None:
        scheduler.stop()
