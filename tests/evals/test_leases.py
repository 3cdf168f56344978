"""Eval runs' leases against the real database (no worker): one holder at a time, and a worker
whose run was taken over (or cancelled) while it was silent stops without writing."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import func, text, update

from core.database import session_scope
from core.models import EvalRun, JobStatus
from core.tenancy import get_or_create_tenant
from evals import runner

pytestmark = pytest.mark.integration
STALE_S, MAX_ATTEMPTS = 60, 3


def _run(session_factory) -> uuid.UUID:
    with session_scope(session_factory) as session:
        tenant = get_or_create_tenant(session, "eval-leases")
        run = EvalRun(tenant_id=tenant.id, kind="retrieval", status=JobStatus.queued, dataset={}, config={})
        session.add(run)
        session.flush()
        return run.id


def _claim(session_factory, run_id, owner) -> bool:
    with session_scope(session_factory) as session:
        return runner.claim(session, run_id, owner, STALE_S, MAX_ATTEMPTS) is not None


def _silence(session_factory, run_id) -> None:
    """The holder stops beating (a long GC pause, a partition) for longer than the stale limit."""
    with session_scope(session_factory) as session:
        old = func.now() - text("interval '1 hour'")
        session.execute(update(EvalRun).where(EvalRun.id == run_id).values(heartbeat_at=old))


def _get(session_factory, run_id) -> EvalRun:
    with session_factory() as session:
        return session.get(EvalRun, run_id)


def test_a_worker_whose_run_was_taken_over_stops_without_writing(session_factory):
    run_id = _run(session_factory)
    assert _claim(session_factory, run_id, "task-1")
    assert not _claim(session_factory, run_id, "task-2")  # a duplicate message while task-1 is alive
    assert _claim(session_factory, run_id, "task-1")  # the holder again: an idempotent claim
    _silence(session_factory, run_id)
    assert _claim(session_factory, run_id, "task-2")  # task-1 went silent: task-2 takes the run over
    # task-1 comes back: its next progress write stops it, and its failure path writes nothing.
    with pytest.raises(runner.Stop), session_scope(session_factory) as session:
        runner.beat(session, run_id, "task-1", items_done=EvalRun.items_done + 1)
    with session_scope(session_factory) as session:
        assert not runner.fail_run(session, run_id, "task-1", "IntegrityError: duplicate item")
    run = _get(session_factory, run_id)
    assert (run.status, run.claimed_by, run.items_done, run.error) == (JobStatus.running, "task-2", 0, None)
    with session_scope(session_factory) as session:  # task-2 goes on
        runner.beat(session, run_id, "task-2", items_done=EvalRun.items_done + 1)
    assert _get(session_factory, run_id).items_done == 1


def test_a_cancel_stops_the_holder_and_a_run_whose_workers_keep_dying_fails(session_factory):
    cancelled = _run(session_factory)
    assert _claim(session_factory, cancelled, "task-1")
    with session_scope(session_factory) as session:
        session.execute(update(EvalRun).where(EvalRun.id == cancelled).values(status=JobStatus.cancelled))
    with pytest.raises(runner.Stop), session_scope(session_factory) as session:
        runner.beat(session, cancelled, "task-1", progress={"stage": "evaluating"})
    assert _get(session_factory, cancelled).status == JobStatus.cancelled

    dying = _run(session_factory)
    for attempt in range(MAX_ATTEMPTS):
        assert _claim(session_factory, dying, f"task-{attempt}")
        _silence(session_factory, dying)
    assert not _claim(session_factory, dying, "task-last")
    run = _get(session_factory, dying)
    assert run.status == JobStatus.failed
    assert run.error == f"gave up: the run's worker died {MAX_ATTEMPTS} times"
