"""core/durable.py: a claim has one winner however many claim at once, and the recovery thread
runs its passes at start-up, then every interval, surviving a failing one."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from core import durable
from core.database import session_scope
from core.models import EvalRun, JobStatus
from core.tenancy import get_or_create_tenant

pytestmark = pytest.mark.integration


def test_of_eight_concurrent_claims_exactly_one_wins(session_factory):
    with session_scope(session_factory) as session:
        tenant = get_or_create_tenant(session, "durable-claims")
        run = EvalRun(tenant_id=tenant.id, kind="retrieval", status=JobStatus.queued, dataset={}, config={})
        session.add(run)
        session.flush()
        run_id = run.id
    together = threading.Barrier(8)

    def claim(owner: str) -> bool:
        with session_scope(session_factory) as session:
            together.wait()
            return durable.claim(session, EvalRun, run_id, owner, 60, None, [JobStatus.queued]) is not None

    with ThreadPoolExecutor(8) as pool:
        won = list(pool.map(claim, [f"worker-{i}" for i in range(8)]))
    assert won.count(True) == 1
    with session_factory() as session:
        row = session.get(EvalRun, run_id)
        assert (row.claimed_by, row.attempts) == (f"worker-{won.index(True)}", 1)
        assert durable.beat(session, EvalRun, [run_id], "worker-x") == set()  # not its row
        assert durable.beat(session, EvalRun, [run_id], row.claimed_by) == {run_id}


def _until(condition, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


@pytest.mark.parametrize("interval_s", [3600.0, 0.05])
def test_recovery_runs_its_passes_at_start_and_survives_a_failing_one(interval_s):
    runs: list[int] = []

    def failing() -> None:
        raise ConnectionError("the database is restarting")

    recovery = durable.Recovery(
        "test-recovery", [("failing", failing), ("counting", lambda: runs.append(1))], interval_s
    )
    recovery.start()
    # At start-up, not an interval later; and again every interval: the failing pass stops nothing.
    assert _until(lambda: len(runs) >= (1 if interval_s > 60 else 3))
    recovery.stop()
    recovery.join(5)
    assert not recovery.is_alive()
    if interval_s > 60:
        assert len(runs) == 1
