"""Agent runs driven by several API processes on one database: each segment holds a lease
(agents/runs/lease.py). Two runners stand for two processes (each its own lease owner and
checkpointer pool); a scripted model stands for the LLM, so that a test decides when each step
happens. Real Postgres, the real LangGraph checkpointer and the real react graph."""

from __future__ import annotations

import asyncio
import threading
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import func, update

from agents.graphs.common import AgentDeps, Budgets
from agents.runs.recovery import resume_stalled
from agents.runs.runner import AgentRunner
from agents.runs.store import ACTIVE
from agents.tools import ToolContext
from core.database import session_scope
from core.models import AgentRun
from core.tenancy import get_or_create_tenant
from tests.agents.test_graphs import ScriptedModel

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
CALC = ("calculator", {"expression": "6 * 7"})
ANSWER = ("final_answer", {"answer": "42", "sources": []})


class GatedModel(ScriptedModel):
    """The scripted turns; before the turn numbered `pause_at` (from 0) it sets `paused` and waits
    for `go` (forever if nobody sets it: a hung LLM call, or a process about to die)."""

    def __init__(self, *turns, pause_at: int | None = None) -> None:
        super().__init__(*turns)
        self.pause_at, self.paused, self.go = pause_at, asyncio.Event(), asyncio.Event()

    async def call(self, *args, **kwargs):
        if len(self.seen) == self.pause_at:
            self.paused.set()
            await self.go.wait()
        return await super().call(*args, **kwargs)


class ScriptedRunner(AgentRunner):
    """One API process whose runs call `model` instead of the engine."""

    def __init__(self, session_factory, settings, database_url, model: GatedModel) -> None:
        super().__init__(session_factory, settings, database_url, lambda: [])
        self.model = model

    def _deps(self, run: AgentRun) -> AgentDeps:
        context = ToolContext(self.sessions, self.settings, run.tenant_id, [])
        return AgentDeps(self.model, context, list(run.tools), [], Budgets(**run.budgets))


def _settings(settings, stale_after_s: float):
    agents = settings.agents.model_copy(update={"stale_after_s": stale_after_s})
    return settings.model_copy(update={"agents": agents})


def _new_run(session_factory) -> uuid.UUID:
    with session_scope(session_factory) as session:
        tenant = get_or_create_tenant(session, "agent-leases")
        run = AgentRun(
            tenant_id=tenant.id,
            agent="react",
            status="queued",
            input="What is 6 * 7?",
            collection_ids=[],
            tools=["calculator"],
            client_tools=[],
            mcp_servers=[],
            budgets=Budgets().model_dump(),
            plan=[],
            trace=[],
            required_action={},
            citations=[],
            usage={},
        )
        session.add(run)
        session.flush()
        return run.id


def _no_stalled_runs(session_factory) -> None:
    """Runs earlier tests left cut mid-segment would be resumed by these runners' recovery."""
    with session_scope(session_factory) as session:
        session.execute(update(AgentRun).where(AgentRun.status.in_(ACTIVE)).values(status="failed"))


def _row(session_factory, run_id) -> AgentRun:
    with session_factory() as session:
        return session.get(AgentRun, run_id)


def test_a_run_whose_process_died_is_resumed_by_exactly_one_other(settings, session_factory, database_url):
    knobs = _settings(settings, stale_after_s=1.0)
    _no_stalled_runs(session_factory)

    async def scenario() -> None:
        dying = GatedModel(CALC, ANSWER, pause_at=1)  # hangs in its second LLM call, then dies
        b_model, c_model = GatedModel(ANSWER), GatedModel(ANSWER)
        a, b, c = (ScriptedRunner(session_factory, knobs, database_url, m) for m in (dying, b_model, c_model))
        try:
            run_id = _new_run(session_factory)
            await a.start(run_id, fresh=True)
            await asyncio.wait_for(dying.paused.wait(), 60)  # the calculator step is checkpointed
            assert await resume_stalled(b) == [] and await resume_stalled(c) == []  # A is alive
            assert await b.start(run_id) is None  # a live segment's run cannot be claimed
            await a.aclose()  # process A dies mid-segment: the run stays running, its lease goes stale
            assert _row(session_factory, run_id).status == "running"
            await asyncio.sleep(1.5)
            resumed = [await resume_stalled(b), await resume_stalled(c)]
            assert resumed == [[run_id], []], resumed
            assert await c.start(run_id) is None  # nor may C claim it while B's segment holds it
            await b.wait(run_id)
            run = _row(session_factory, run_id)
            assert (run.status, run.answer, run.claimed_by) == ("completed", "42", None)
            # B went on from A's last checkpoint: the calculator step is not done again.
            assert [s["name"] for s in run.trace if s["type"] == "tool_call"] == ["calculator"]
            assert (len(dying.seen), len(b_model.seen), len(c_model.seen)) == (1, 1, 0)
        finally:
            for runner in (a, b, c):
                await runner.aclose()

    asyncio.run(scenario())


@pytest.mark.parametrize("stale_after_s", [30.0, 0.6], ids=["between-steps", "mid-llm-call"])
def test_a_cancel_written_by_one_process_stops_the_run_another_drives(
    settings, session_factory, database_url, stale_after_s
):
    """Between steps: B's next step sees the cancel (its beat, every 10 s, has not run yet).
    Mid LLM call: the call never returns; B's beat sees the cancel and stops the segment."""

    async def scenario() -> None:
        model = GatedModel(CALC, CALC, ANSWER, pause_at=1)
        a = ScriptedRunner(session_factory, _settings(settings, 30.0), database_url, GatedModel())
        b = ScriptedRunner(session_factory, _settings(settings, stale_after_s), database_url, model)
        try:
            run_id = _new_run(session_factory)
            listening = b.live.subscribe(run_id)  # a caller streaming the run from process B
            segment = await b.start(run_id, fresh=True)
            await asyncio.wait_for(model.paused.wait(), 60)
            with session_factory() as session:  # the cancel route, in process A
                await a.cancel(session.get(AgentRun, run_id), session)
            at_cancel = _row(session_factory, run_id)
            if stale_after_s > 1:
                model.go.set()  # the LLM call returns: a second calculator step
            await asyncio.wait_for(segment, 30)
            run = _row(session_factory, run_id)
            assert (run.status, run.finish_reason, run.answer) == ("cancelled", "cancelled", None)
            assert run.trace == at_cancel.trace  # B wrote nothing after the cancel
            assert len(model.seen) == (2 if stale_after_s > 1 else 1)  # and no LLM call after it
            events = [e async for e in b.live.stream(run_id, listening)]  # it is told, and not left waiting
            assert events[-1]["type"] == "final" and events[-1]["status"] == "cancelled", events[-1]
        finally:
            await a.aclose()
            await b.aclose()

    asyncio.run(scenario())


def test_a_run_whose_segments_keep_dying_is_given_up(settings, session_factory, database_url):
    knobs = _settings(settings, stale_after_s=1.0)
    most = knobs.agents.max_attempts
    _no_stalled_runs(session_factory)
    doomed, last_chance = _new_run(session_factory), _new_run(session_factory)
    with session_scope(session_factory) as session:  # segments claimed, none ended, holders silent
        for run_id, started in ((doomed, most), (last_chance, most - 1)):
            silent = func.now() - timedelta(seconds=5)
            session.execute(
                update(AgentRun)
                .where(AgentRun.id == run_id)
                .values(claimed_by="dead/x", heartbeat_at=silent, attempts=started)
            )

    async def scenario() -> None:
        runner = ScriptedRunner(session_factory, knobs, database_url, ScriptedModel(ANSWER))
        try:
            assert await resume_stalled(runner) == [last_chance]
            await runner.wait(last_chance)
        finally:
            await runner.aclose()

    asyncio.run(scenario())
    row = _row(session_factory, doomed)
    assert (row.status, row.finish_reason, row.claimed_by) == ("failed", "error", None)
    assert row.detail == f"gave up: the run's process died in {most} segments in a row"
    row = _row(session_factory, last_chance)
    assert (row.status, row.answer, row.attempts) == ("completed", "42", 0)  # a clean end: count reset


def test_the_checkpoint_pool_is_closed_on_the_loop_that_opened_it(settings, session_factory, database_url):
    # A test server runs its lifespan on one loop and its requests on another (CI's web tests did):
    # the pool a request opened is closed on its own loop, or dropped with it once that loop is gone.
    runner = ScriptedRunner(session_factory, settings, database_url, ScriptedModel(ANSWER))
    serving = asyncio.new_event_loop()
    thread = threading.Thread(target=serving.run_forever, daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(runner.saver(), serving).result(60)  # a request's first run
        pool = runner._pool
        asyncio.run(runner.aclose())  # the lifespan's shutdown, on its own loop
        assert pool.closed and runner._pool is None
    finally:
        serving.call_soon_threadsafe(serving.stop)
        thread.join(10)
        serving.close()
    gone = asyncio.new_event_loop()
    gone.run_until_complete(runner.saver())
    gone.close()  # the server's loop ended first
    asyncio.run(runner.aclose())  # nothing left to close it on: dropped, no error
    assert runner._pool is None
