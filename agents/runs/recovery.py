"""Recovery of agent runs: every API process, at start-up and every `agents.recovery_interval_s`,
resumes the runs whose segment went silent for `agents.stale_after_s` (its process died) from
their last checkpoint, and starts queued runs nobody started.

NOTE: several processes may find the same run; each claims it before resuming it (the runner's
`start`), and the claim is one conditional UPDATE: exactly one of them resumes it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from agents.runs.checkpoints import prune_finished
from agents.runs.runner import AgentRunner
from agents.runs.store import ACTIVE
from core import durable
from core.models import AgentRun
from core.offload import off_loop

log = logging.getLogger("groundwork.agents")


async def resume_stalled(runner: AgentRunner) -> list[uuid.UUID]:
    """One recovery pass; also prunes finished runs' checkpoints. Returns the runs this process
    resumed (another process's claim may have won some of those found)."""
    found, pruned = await off_loop(_stalled, runner)
    if pruned:
        log.info("pruned checkpoints of %d finished agent runs", pruned)
    resumed = [i for i, fresh in found if await runner.start(i, fresh=fresh)]
    if resumed:
        log.info("resumed %d agent runs whose segment's process went silent", len(resumed))
    return resumed


def _stalled(runner: AgentRunner) -> tuple[list[tuple[uuid.UUID, bool]], int]:
    """(run id, never started) of the stalled runs, and how many finished runs' checkpoints were
    pruned; in a worker thread (SQL off the event loop)."""
    with runner.sessions() as session:
        stalled = durable.find_stalled(session, AgentRun, ACTIVE, runner.settings.agents.stale_after_s)
        found = [(run.id, run.status == "queued") for run in stalled]  # queued: never started
        pruned = prune_finished(session)
        session.commit()  # NOTE: before claiming: each claim updates a row locked here
    return found, pruned


def start_recovery(runner: AgentRunner) -> durable.Recovery:
    """Run `resume_stalled` now and every `agents.recovery_interval_s` on the running event loop
    (the API's lifespan calls this), from a core.durable.Recovery thread; `runner.shutdown` stops it."""
    loop, knobs = asyncio.get_running_loop(), runner.settings.agents

    def recovery_pass() -> None:
        asyncio.run_coroutine_threadsafe(resume_stalled(runner), loop).result(knobs.stale_after_s)

    runner.recovery = durable.Recovery(
        "agent-recovery", [("stalled agent runs", recovery_pass)], knobs.recovery_interval_s
    )
    runner.recovery.start()
    return runner.recovery
