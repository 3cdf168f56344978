"""Celery tasks. Each task reads what it needs from the database; messages carry ids only."""

from __future__ import annotations

import logging
import os
import random
import socket
import uuid

from celery import Celery, current_app, shared_task
from celery.signals import worker_ready, worker_shutdown

from core.database import make_engine, make_session_factory, session_scope
from ingestion import state, tracing  # noqa: F401 (tracing connects the task signals)
from ingestion.celery_app import worker_models
from ingestion.errors import INTERNAL_ERROR, is_transient
from ingestion.liveness import AliveLock
from ingestion.pipeline import PipelineContext, process_documents
from ingestion.recovery import reaper
from ingestion.uploads import INGEST_TASK, enqueue

log = logging.getLogger(__name__)


def _context(app) -> PipelineContext:
    """This worker process's pipeline context, built on its first task and kept on its Celery app.

    NOTE: per process id: prefork children must not share their parent's database connections, so
    a child that inherited its parent's context builds its own."""
    held: tuple[int, PipelineContext] | None = getattr(app, "groundwork_ingestion", None)
    if held is None or held[0] != os.getpid():
        settings = app.conf.groundwork_settings
        if settings.ingestion.worker_nice:
            os.nice(settings.ingestion.worker_nice)  # once per process: this context is built once
        if settings.ingestion.torch_threads:
            import torch

            torch.set_num_threads(settings.ingestion.torch_threads)
        engine = make_engine(app.conf.groundwork_database_url)
        context = PipelineContext.create(settings, make_session_factory(engine), worker_models(app))
        held = (os.getpid(), context)
        app.groundwork_ingestion = held
    return held[1]


@shared_task(name="groundwork.health", ignore_result=False)
def health() -> dict:
    """Proves a worker consumes from the broker (used by /readyz and the tests)."""
    return {"ok": True, "pid": os.getpid(), "host": socket.gethostname()}


@shared_task(bind=True, name=INGEST_TASK, acks_late=True, max_retries=None)
def ingest_documents(self, job_id: str, document_ids: list[str]) -> dict[str, str]:
    """parse -> chunk -> embed -> store for a few documents of one job; safe to run any number of times."""
    ctx = _context(self.app)
    ids = [uuid.UUID(d) for d in document_ids]
    try:
        outcomes = process_documents(ctx, uuid.UUID(job_id), ids, self.request.id)
    except Exception as exc:
        knobs = ctx.settings.ingestion
        if is_transient(exc) and self.request.retries < knobs.max_retries:
            countdown = min(knobs.retry_backoff_max_s, 2**self.request.retries) * (0.5 + random.random())
            log.warning("job %s: transient %s, retry in %.1fs", job_id, type(exc).__name__, countdown)
            try:
                with session_scope(ctx.sessions) as session:
                    state.release_for_retry(session, ids, self.request.id)
            except Exception:  # the database is what failed: the retry then counts as an attempt
                log.warning("job %s: claims not released before the retry", job_id, exc_info=True)
            raise self.retry(exc=exc, countdown=countdown) from None
        log.exception("job %s: documents failed", job_id)
        reason = (
            "retries_exhausted: a service the pipeline needs stayed unavailable; requeue the job"
            if is_transient(exc)
            else INTERNAL_ERROR
        )
        with session_scope(ctx.sessions) as session:
            # Only documents this task still holds are failed; indexed ones are terminal already.
            outcomes = {
                d: "failed" if state.fail_document(session, d, reason, self.request.id) else "-" for d in ids
            }
    return {str(d): outcome for d, outcome in outcomes.items()}


def _app(sender) -> Celery:
    return getattr(sender, "app", None) or current_app


@worker_ready.connect
def _start_reaper(sender=None, **_) -> None:
    app = _app(sender)
    settings = app.conf.get("groundwork_settings")
    if settings is None:
        return
    engine = make_engine(app.conf.groundwork_database_url)
    alive = AliveLock(engine, settings.celery_queue)
    alive.start()
    app.groundwork_reapers = [alive]  # the worker's main process: stopped with it
    if settings.ingestion.recovery_interval_s <= 0:
        return
    sessions = make_session_factory(engine)
    recovery = reaper(sessions, lambda job_id, ids: enqueue(app, settings, job_id, ids), settings)
    recovery.start()
    app.groundwork_reapers.append(recovery)


@worker_shutdown.connect
def _stop_reaper(sender=None, **_) -> None:
    for thread in getattr(_app(sender), "groundwork_reapers", []):
        thread.stop()
