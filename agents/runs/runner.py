"""Drives agent runs: starts a graph as an asyncio task, streams its events, records the run.

A run is one LangGraph thread (thread id = run id) on the Postgres checkpointer. It advances in
segments: from the start, or from a `Command(resume=...)` with client tool outputs or a reviewed
plan, until it finishes or pauses on an interrupt. Between segments nothing lives in memory, so a
run waiting for its caller survives an API restart.

Each segment holds a lease on its run (agents/runs/lease.py): claimed before it starts, beaten
while it runs, checked in the transaction of every step it records, released with its result. A
segment cut by a dead process is resumed from its last checkpoint by a recovery
pass every API process runs at start-up and every `agents.recovery_interval_s`
(agents/runs/recovery.py); of several processes, the one whose claim succeeds resumes it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from langgraph.types import Command
from sqlalchemy.orm import Session, sessionmaker

from agents.chat_model import AgentChatModel, TokenGate, TokenLimitReached
from agents.graphs import BUILDERS
from agents.graphs.common import AgentDeps, Budgets
from agents.mcp import McpPool, McpToolbox
from agents.qa.cascade import too_unsupported
from agents.qa.completeness import missing_things
from agents.runs.checkpoints import open_checkpointer
from agents.runs.escalation import NO_ANSWER, answered_by, escalation_step, level, run_usage
from agents.runs.events import RunEvents
from agents.runs.grounding import check_answer, claim_step
from agents.runs.lease import LeaseLost, RunLease
from agents.runs.store import FINISHED, WAITING, finish_run, run_dict
from agents.tools import ToolContext
from core import durable
from core.models import AgentRun
from core.offload import off_loop
from core.settings import Settings
from core.tracing import annotate, traced
from inference.client import ChatBackend
from inference.provider import Rung
from retrieval.models import RetrievalModels

log = logging.getLogger("groundwork.agents")
RETRIES = 3  # a segment that lost its database connection is resumed from its last checkpoint
CANCELLED = {"finish_reason": "cancelled", "detail": "cancelled by the caller"}


class AgentRunner:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        settings: Settings,
        database_url: str,
        models: Callable[[], list[Rung]],
        mcp: McpPool | None = None,
        gate_for: Callable[[AgentRun], TokenGate | None] = lambda run: None,
        escalated: Callable[[list[dict]], None] | None = None,
        retrieval_llm: Callable[[uuid.UUID, ChatBackend], ChatBackend] | None = None,
        retrieval_models: RetrievalModels | None = None,
        pace: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        # models: the cascade (qa.cascade) or the one generator; the first also serves the tools.
        # retrieval_llm: (tenant, that model) -> what the search tools' query transforms and LLM
        # reranker call (LLMProvider.retrieval_backend); without it they are skipped.
        # retrieval_models: the process's embedders and cross-encoders, for the search tools.
        # pace: awaited before each built-in tool call (the API's Foreground.yield_to_holds: another
        # tenant's interactive request goes first).
        self.sessions, self.settings, self.database_url = sessions, settings, database_url
        self.models, self.retrieval_llm = models, retrieval_llm
        self.retrieval_models, self.pace = retrieval_models, pace
        self.mcp, self.escalated = mcp, escalated
        # Who pays for a run's LLM calls: the gate its segment was started with (the caller's key),
        # else `gate_for(run)` (a run resumed after a restart: its tenant).
        self.gate_for = gate_for
        self.gates: dict[uuid.UUID, TokenGate] = {}
        self.tasks: dict[uuid.UUID, asyncio.Task] = {}
        self.leases: dict[uuid.UUID, RunLease] = {}
        self.process = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"  # this runner, in every lease it holds
        self.recovery: durable.Recovery | None = None  # started by the API's lifespan (recovery.py)
        self.live = RunEvents()  # what listeners here are sent as the segments go
        self._cancelling: set[uuid.UUID] = set()
        self._claiming: set[uuid.UUID] = set()
        self._stopped = False  # shut down: starts nothing (a recovery pass may still be on its way)
        self._saver = None
        self._pool = None
        self._pool_loop: asyncio.AbstractEventLoop | None = None  # the loop its connections live on
        self._lock = asyncio.Lock()

    async def saver(self):
        async with self._lock:
            if self._saver is None:
                self._pool, self._saver = await open_checkpointer(self.database_url)
                self._pool_loop = asyncio.get_running_loop()
        return self._saver

    # --- starting and resuming -----------------------------------------------------------------

    async def start(
        self, run_id: uuid.UUID, resume: Any = None, fresh: bool = False, gate: TokenGate | None = None
    ) -> asyncio.Task | None:
        """Claim the run and run its next segment in the background (from the start, a resume
        value, or the last checkpoint), its LLM calls charged through `gate`; None if a live
        segment (of this process or another) holds the run, or it is finished."""
        # NOTE: a segment of this process that runs or is being claimed holds the run: the claim
        # alone would not tell (the lease's holder is the same for both), and it awaits (off the loop).
        if run_id in self.tasks or run_id in self._claiming or self._stopped:
            return None
        knobs = self.settings.agents
        lease = RunLease(self.sessions, self.process, run_id, knobs.stale_after_s, knobs.max_attempts)
        self._claiming.add(run_id)
        try:
            # Stopped meanwhile: the claimed run waits for another process, as if this one died.
            if not await off_loop(lease.claim) or self._stopped:
                return None
        finally:
            self._claiming.discard(run_id)
        if gate is not None:
            self.gates[run_id] = gate
        self.leases[run_id] = lease
        task = asyncio.create_task(self._drive(run_id, resume, fresh))
        self.tasks[run_id] = task
        lease.keep_alive(task)

        def done(_: asyncio.Task) -> None:
            if self.tasks.get(run_id) is task:
                self.tasks.pop(run_id, None)
                self.gates.pop(run_id, None)
                self.leases.pop(run_id, None)

        task.add_done_callback(done)
        return task

    async def wait(self, run_id: uuid.UUID) -> None:
        task = self.tasks.get(run_id)
        if task is not None:
            await asyncio.shield(task)

    async def cancel(self, run: AgentRun, session: Session) -> None:
        task = self.tasks.get(run.id)
        if task is not None:
            self._cancelling.add(run.id)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            session.refresh(run)
            return
        finish_run(run, "cancelled", {}, "cancelled while waiting for the caller")
        session.commit()
        await self._prune(run.id)
        self.live.publish(run.id, {"type": "final", **run_dict(run, trace=False)})

    def shutdown(self) -> None:
        """Process exit: stop segments without marking them, so that another process resumes them
        once their leases go stale."""
        self._stopped = True
        if self.recovery is not None:
            self.recovery.stop()
        for task in list(self.tasks.values()):
            task.cancel()

    async def aclose(self) -> None:
        """`shutdown`, then wait for the cancelled segments and close the checkpointer's pool.

        NOTE: a pool left open outlives the event loop: its connections (one may be mid-setup)
        keep the loop's shutdown waiting on tasks that can no longer finish. The pool is closed on
        the loop that opened it (a server may run requests on another loop than its lifespan);
        if that loop is gone, its connections went with it."""
        self.shutdown()
        here = asyncio.get_running_loop()
        mine = [task for task in self.tasks.values() if task.get_loop() is here]
        await asyncio.gather(*mine, return_exceptions=True)
        async with self._lock:
            pool, loop = self._pool, self._pool_loop
            self._pool, self._saver, self._pool_loop = None, None, None
        if pool is None:
            return
        if loop is here:
            await pool.close()
        elif loop.is_running():
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(pool.close(), loop))

    # --- one segment ---------------------------------------------------------------------------

    def _deps(self, run: AgentRun) -> AgentDeps:
        everyone = self.models()
        rungs = everyone[min(level(run.trace), len(everyone) - 1) :]  # a try that gave no answer is left
        backend = rungs[0].backend
        collection_ids = [uuid.UUID(c) for c in run.collection_ids]
        context = ToolContext(
            self.sessions, self.settings, run.tenant_id, collection_ids, backend, models=self.retrieval_models
        )
        if self.retrieval_llm is not None:
            context.retrieval_llm = self.retrieval_llm(run.tenant_id, backend)
        gate = self.gates.get(run.id) or self.gate_for(run)
        model = AgentChatModel(
            backend,
            cache_salt=str(run.tenant_id),
            gate=gate,
            rungs=rungs,
            escalated=self.escalated,
            tool_format=self.settings.agents.tool_call_format,
        )
        return AgentDeps(
            model,
            context,
            list(run.tools),
            list(run.client_tools),
            Budgets(**run.budgets),
            run.review_plan,
            pace=self.pace,
        )

    @traced("invoke_agent", {"gen_ai.operation.name": "invoke_agent"})
    async def _drive(self, run_id: uuid.UUID, resume: Any, fresh: bool) -> None:
        saver = await self.saver()  # NOTE: before any session: its first use may create tables
        with self.sessions() as session:
            run = session.get(AgentRun, run_id)
            if run is None or run.status in FINISHED:
                return
            try:
                await self._run_segment(run, session, saver, resume, fresh)
            except LeaseLost:
                # NOTE: nothing of this segment was written after the run stopped being ours; the
                # listeners here see what the row says now (cancelled, or working elsewhere).
                log.info("agent run %s was cancelled or taken over elsewhere; its segment stopped", run_id)
                session.rollback()
                now = session.get(AgentRun, run_id, populate_existing=True)
                if now is not None:
                    self.live.publish(run_id, {"type": "final", **run_dict(now, trace=False)})

    async def _run_segment(self, run: AgentRun, session: Session, saver, resume: Any, fresh: bool) -> None:
        annotate(
            {"gen_ai.agent.name": run.agent, "groundwork.run_id": str(run.id)},
            f"invoke_agent {run.agent}",
        )
        try:
            graph = BUILDERS[run.agent]().compile(checkpointer=saver)
            deps = await self.deps(run)  # (starting an MCP server takes seconds)
        except asyncio.CancelledError:
            if not self._cancelled_by_caller(run.id):
                raise
            await self._record(run, session, dict(CANCELLED), None)
            return
        self._note_unavailable(run, deps.mcp)
        graph_input: Any = Command(resume=resume) if resume is not None else None
        if fresh:
            graph_input = {"task": run.input, "usage": {}}
        run.status, run.required_action = "running", {}
        await off_loop(self._commit, run, session)
        values, interrupt, ended = await self._segment(run, session, graph, graph_input, deps)
        models = [rung.name for rung in self.models()]
        while ended and (reason := await self._weakness(run, values, models)):
            # The next model runs the task again from the start.
            step = escalation_step(models[level(run.trace)], values, reason)
            run.trace = [*run.trace, step]
            self.live.publish(run.id, step)
            if self.escalated is not None:
                self.escalated([{"from": step["from"], "reason": step["reason"]}])
            await off_loop(self._commit, run, session)
            await self._prune(run.id)
            retry = self._deps(run)
            retry.mcp = deps.mcp
            values, interrupt, ended = await self._segment(
                run, session, graph, {"task": run.input, "usage": {}}, retry
            )
        await self._record(run, session, values, interrupt)

    async def _weakness(self, run: AgentRun, values: dict, models: list[str]) -> str | None:
        """Why the next model should run the task again (None: this try stands). An answer's claim
        check is recorded in the trace whatever the cascade."""
        finish_reason = values.get("finish_reason")
        if finish_reason == "answered":
            model = answered_by(run.trace)["model"]
            claims = await check_answer(values)
            missing = missing_things(run.input, values.get("answer") or "")
            step = claim_step(model, claims, missing)
            run.trace = [*run.trace, step]
            self.live.publish(run.id, step)
            # NOTE: turns may already have escalated: an answer the last model wrote stands.
            if model not in models[:-1]:
                return None
            if too_unsupported(claims, self.settings.qa):
                reason = "unsupported_claims"
            elif missing:
                reason = "incomplete_answer"
            else:
                return None
        elif finish_reason in NO_ANSWER:
            reason = f"no_answer:{finish_reason}"
        else:
            return None
        return reason if level(run.trace) + 1 < len(models) else None

    def _commit(self, run: AgentRun, session: Session) -> None:
        """Record the step, in one transaction with the check that the run is still this
        segment's (LeaseLost, nothing written, if it was cancelled or taken over elsewhere)."""
        self.leases[run.id].hold(session)
        session.commit()

    async def _segment(
        self, run: AgentRun, session: Session, graph, graph_input: Any, deps: AgentDeps
    ) -> tuple[dict, dict | None, bool]:
        """Run the graph until it ends or pauses, within the run's wall-clock budget: the state's
        values, the interrupt it paused on, and whether the graph itself ended it (not the runner)."""
        config = {"configurable": {"thread_id": str(run.id), "deps": deps}, "recursion_limit": 200}
        started = time.monotonic()
        interrupt: dict | None = None
        ended = False
        try:
            left = Budgets(**run.budgets).max_seconds - run.active_s
            async with asyncio.timeout(max(left, 0.001)):
                interrupt = await self._stream(run, session, graph, graph_input, config)
            values, ended = (await graph.aget_state(config)).values, True
        except TimeoutError:
            values = (await graph.aget_state(config)).values
            values = {**values, "finish_reason": "budget_exhausted", "detail": "wall-clock budget spent"}
        except TokenLimitReached as exc:
            values = (await graph.aget_state(config)).values
            values = {**values, "finish_reason": "budget_exhausted", "detail": str(exc)}
        except asyncio.CancelledError:
            run.active_s += time.monotonic() - started
            if not self._cancelled_by_caller(run.id):
                self._commit(run, session)
                raise  # shutting down: the run stays "running" until another process resumes it
            values = dict(CANCELLED)
            started = time.monotonic()
        except LeaseLost:
            raise
        except Exception as exc:
            log.exception("agent run %s failed", run.id)
            values = {"finish_reason": "error", "detail": f"{type(exc).__name__}: {exc}"}
        run.active_s += time.monotonic() - started
        return values, interrupt, ended

    async def deps(self, run: AgentRun) -> AgentDeps:
        """What a segment of the run uses, with its MCP servers' tools listed now: also what a
        replacement plan is checked against, so that it may name every tool the run may use."""
        await off_loop(self.models)  # the first call loads the generator: seconds to minutes
        deps = self._deps(run)
        if run.mcp_servers and self.mcp is not None:
            deps.mcp = await McpToolbox.open(self.mcp, list(run.mcp_servers))
        return deps

    def _cancelled_by_caller(self, run_id: uuid.UUID) -> bool:
        """Whether a CancelledError is the caller's cancel (else: shutting down); LeaseLost if it
        is the lease's (the run was cancelled or taken over elsewhere)."""
        if self.leases[run_id].lost:
            raise LeaseLost(str(run_id))
        if run_id not in self._cancelling:
            return False
        self._cancelling.discard(run_id)
        return True

    def _note_unavailable(self, run: AgentRun, box: McpToolbox | None) -> None:
        """A server that cannot start is a trace step, not a failure."""
        for server, detail in (box.unavailable if box else {}).items():
            event = {
                "type": "mcp_unavailable",
                "server": server,
                "detail": detail,
                "at": round(time.time(), 3),
            }
            run.trace = [*run.trace, event]
            self.live.publish(run.id, event)

    async def _stream(self, run: AgentRun, session: Session, graph, graph_input, config) -> dict | None:
        """Stream one segment; returns the interrupt it paused on, if any."""
        interrupt = None
        for attempt in range(RETRIES):
            try:
                async for _ns, mode, data in graph.astream(
                    graph_input, config, stream_mode=["custom", "updates"], subgraphs=True
                ):
                    if mode == "custom":
                        run.trace = [*run.trace, data]
                        self.live.publish(run.id, data)
                    elif "__interrupt__" in data:
                        interrupt = data["__interrupt__"][0].value
                    elif mode == "updates":
                        # The trace so far, for GET while the run works (SQL off the event loop).
                        await off_loop(self._commit, run, session)
                return interrupt
            except psycopg.OperationalError:
                if attempt == RETRIES - 1:
                    raise
                log.warning("agent run %s lost its database connection; resuming", run.id, exc_info=True)
                await asyncio.sleep(0.5 * 2**attempt)
                graph_input = None
        return interrupt

    async def _record(self, run: AgentRun, session: Session, values: dict, interrupt: dict | None) -> None:
        run.usage = run_usage(values.get("usage"), run.trace) if values.get("usage") else run.usage
        run.plan = values.get("plan") or run.plan
        lease = self.leases[run.id]
        if interrupt is not None and not values.get("finish_reason"):
            lease.release(session)
            run.status, run.required_action = WAITING, interrupt
            session.commit()
            self.live.publish(run.id, {"type": "requires_action", **run_dict(run, trace=False)})
            return
        finish_run(
            run,
            values.get("finish_reason") or "error",
            values,
            None if values.get("finish_reason") else "the graph ended without an answer",
        )
        lease.release(session)
        session.commit()
        await self._prune(run.id)
        self.live.publish(run.id, {"type": "final", **run_dict(run, trace=False)})

    async def _prune(self, run_id: uuid.UUID) -> None:
        try:
            await (await self.saver()).adelete_thread(str(run_id))
        except psycopg.Error:  # recover() sweeps again later
            log.warning("could not prune checkpoints of run %s", run_id, exc_info=True)
