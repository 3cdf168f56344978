"""Celery task and recovery of evaluation runs (messages carry the run id only).

Recovery mirrors ingestion's (ingestion/recovery.py): each worker's main process runs a
core.durable.Recovery that looks, at start-up and every `ingestion.recovery_interval_s`, for
running runs whose heartbeat is older than `ingestion.stale_after_s` (their worker died) and for
queued runs nobody took within that time (a lost message), and sends them again. The task's
claim (claimed_by = the task id and its delivery) makes duplicate messages harmless.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable

from celery import Celery, current_app, shared_task
from celery.signals import worker_ready, worker_shutdown
from sqlalchemy import func, update
from sqlalchemy.orm import Session, sessionmaker

from core import durable
from core.database import make_engine, make_session_factory, session_scope
from core.models import EvalRun, JobStatus
from core.settings import Settings
from evals.runner import OPEN, RunContext, run_eval
from usecases.platform import worker_platform

log = logging.getLogger(__name__)
EVAL_TASK = "groundwork.evals.run"


def send_run(app: Celery, settings: Settings, run_id: uuid.UUID) -> None:
    app.send_task(EVAL_TASK, args=[str(run_id)], queue=settings.celery_queue)


def _context(app: Celery) -> RunContext:
    """This run's context, on the worker process's one platform (usecases/platform.py)."""
    platform = worker_platform(app)
    worker = f"{os.getpid()}@{socket.gethostname()}"
    return RunContext(platform.settings, platform.sessions, worker, platform.llm, platform.models)


@shared_task(bind=True, name=EVAL_TASK, acks_late=True)
def run_evaluation(self, run_id: str) -> str:
    """Evaluate one run to its end (or until it is cancelled); safe to receive more than once.

    NOTE: the lease's holder is this delivery of the message, not only its task id: a broker
    delivers one message again, same task id, to a second worker (Redis after its visibility
    timeout, an hour, while a long run still works); sharing a holder, both would write."""
    return run_eval(_context(self.app), uuid.UUID(run_id), f"{self.request.id}/{uuid.uuid4().hex[:12]}")


def find_stalled(session: Session, stale_after_s: float) -> list[uuid.UUID]:
    """Runs to send again: running with a dead worker, or queued and never taken."""
    ids = [run.id for run in durable.find_stalled(session, EvalRun, OPEN, stale_after_s)]
    if ids:
        # NOTE: the heartbeat stays stale for the claim (a running run is taken over only when its
        # holder is silent); queued runs get a fresh one so that they are not re-sent every pass.
        session.execute(
            update(EvalRun)
            .where(EvalRun.id.in_(ids), EvalRun.status == JobStatus.queued)
            .values(heartbeat_at=func.now())
        )
    return ids


def resend_stalled(app: Celery, sessions: sessionmaker[Session], settings: Settings) -> Callable[[], None]:
    """The recovery pass: send the stalled runs again (once, then every tenth pass they stay so)."""
    sent: dict[uuid.UUID, int] = {}

    def recovery_pass() -> None:
        with session_scope(sessions) as session:
            stalled = find_stalled(session, settings.ingestion.stale_after_s)
        for run_id in stalled:
            sent[run_id] = sent.get(run_id, 0) + 1
            if sent[run_id] == 1 or sent[run_id] % 10 == 0:
                log.warning("re-sending eval run %s: its worker stopped or its message was lost", run_id)
                send_run(app, settings, run_id)

    return recovery_pass


@worker_ready.connect
def _start_recovery(sender=None, **_) -> None:
    app = getattr(sender, "app", None) or current_app
    settings = app.conf.get("groundwork_settings")
    if settings is None or settings.ingestion.recovery_interval_s <= 0:
        return
    sessions = make_session_factory(make_engine(app.conf.groundwork_database_url))
    passes = [("stalled eval runs", resend_stalled(app, sessions, settings))]
    recovery = durable.Recovery("eval-recovery", passes, settings.ingestion.recovery_interval_s)
    recovery.start()
    app.groundwork_eval_recovery = recovery  # kept on the worker's app, stopped with it


@worker_shutdown.connect
def _stop_recovery(sender=None, **_) -> None:
    app = getattr(sender, "app", None) or current_app
    recovery: durable.Recovery | None = getattr(app, "groundwork_eval_recovery", None)
    if recovery is not None:
        recovery.stop()
