"""Celery task and recovery of evaluation runs (messages carry the run id only).

Recovery mirrors ingestion's (ingestion/recovery.py): each worker's main process looks, every
`ingestion.recovery_interval_s`, for running runs whose heartbeat is older than
`ingestion.stale_after_s` (their worker died) and for queued runs nobody took within that time
(a lost message), and sends them again. The task's claim makes duplicate messages harmless.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from datetime import timedelta

from celery import Celery, current_app, shared_task
from celery.signals import worker_ready, worker_shutdown
from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from core.database import make_engine, make_session_factory, session_scope
from core.models import EvalRun, JobStatus
from core.settings import Settings
from evals.runner import RunContext, run_eval
from usecases.platform import worker_platform

log = logging.getLogger(__name__)
EVAL_TASK = "groundwork.evals.run"

_THREADS: list[threading.Event] = []


def send_run(app: Celery, settings: Settings, run_id: uuid.UUID) -> None:
    app.send_task(EVAL_TASK, args=[str(run_id)], queue=settings.celery_queue)


def _context(app: Celery) -> RunContext:
    """This run's context, on the worker process's one platform (usecases/platform.py)."""
    platform = worker_platform(app)
    worker = f"{os.getpid()}@{socket.gethostname()}"
    return RunContext(platform.settings, platform.sessions, worker, platform.llm.backend)


@shared_task(bind=True, name=EVAL_TASK, acks_late=True)
def run_evaluation(self, run_id: str) -> str:
    """Evaluate one run to its end (or until it is cancelled); safe to receive more than once."""
    return run_eval(_context(self.app), uuid.UUID(run_id))


def find_stalled(session: Session, stale_after_s: float) -> list[uuid.UUID]:
    """Runs to send again: running with a dead worker, or queued and never taken."""
    cutoff = func.now() - timedelta(seconds=stale_after_s)
    stalled = select(EvalRun.id).where(
        or_(
            (EvalRun.status == JobStatus.running) & (EvalRun.heartbeat_at < cutoff),
            (EvalRun.status == JobStatus.queued)
            & (func.coalesce(EvalRun.heartbeat_at, EvalRun.created_at) < cutoff),
        )
    )
    ids = list(session.scalars(stalled.with_for_update(skip_locked=True)))
    if ids:
        # NOTE: the heartbeat stays stale for the claim (a running run is taken over only when its
        # holder is silent); queued runs get a fresh one so that they are not re-sent every pass.
        session.execute(
            update(EvalRun)
            .where(EvalRun.id.in_(ids), EvalRun.status == JobStatus.queued)
            .values(heartbeat_at=func.now())
        )
    return ids


def _recovery_loop(app: Celery, sessions: sessionmaker[Session], settings: Settings, stop) -> None:
    knobs = settings.ingestion
    sent: dict[uuid.UUID, int] = {}
    while not stop.wait(knobs.recovery_interval_s):
        try:
            with session_scope(sessions) as session:
                stalled = find_stalled(session, knobs.stale_after_s)
            for run_id in stalled:
                sent[run_id] = sent.get(run_id, 0) + 1
                if sent[run_id] == 1 or sent[run_id] % 10 == 0:  # once, then now and then
                    log.warning("re-sending eval run %s: its worker stopped or its message was lost", run_id)
                    send_run(app, settings, run_id)
        except Exception:  # the database may be restarting; try again next round
            log.warning("eval recovery pass failed", exc_info=True)


@worker_ready.connect
def _start_recovery(sender=None, **_) -> None:
    app = getattr(sender, "app", None) or current_app
    settings = app.conf.get("groundwork_settings")
    if settings is None or settings.ingestion.recovery_interval_s <= 0:
        return
    sessions = make_session_factory(make_engine(app.conf.groundwork_database_url))
    stop = threading.Event()
    threading.Thread(
        target=_recovery_loop, args=(app, sessions, settings, stop), name="eval-recovery", daemon=True
    ).start()
    _THREADS.append(stop)


@worker_shutdown.connect
def _stop_recovery(**_) -> None:
    for stop in _THREADS:
        stop.set()
