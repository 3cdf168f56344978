"""Running an agent run's segments: start it, resume it with client tool outputs or a reviewed plan,
cancel it, or run one as a chat model's events.

The caller passes the process's `AgentRunner` and the `TokenGate` that charges each LLM call of the
segment to whoever asked (api/charging.py AgentTokenGate: the caller's meter, the tenant's answer
slots), and says how it takes the segment (`Mode`). Each function owns its session.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

from agents.chat_model import TokenGate
from agents.graphs import KINDS, PLAN_CHECKS
from agents.runs.runner import AgentRunner
from agents.runs.store import WAITING, run_dict
from core.errors import ClientError
from core.models import AgentRun
from usecases.agent_runs import RunRequest, ToolOutput, create_run, run_or_404
from usecases.platform import Platform

# wait: the run at its next stop; background: the run as queued, at once; stream: its live events.
Mode = Literal["wait", "background", "stream"]
Outcome = dict | AsyncIterator[dict]


async def ready_runner(runner: AgentRunner) -> AgentRunner:
    """The runner, its checkpoint tables made (runs a dead process left are resumed by its
    recovery thread: agents/runs/recovery.py). NOTE: before any session: the tables' first use
    may create them, and that DDL waits for open transactions."""
    await runner.saver()
    return runner


async def _claim(
    runner: AgentRunner, run: AgentRun, gate: TokenGate, resume: Any = None, fresh: bool = False
) -> None:
    """Claim the run and start its next segment; 409 if a segment (here or in another API
    process) holds it: two callers answered the same pause at once."""
    if await runner.start(run.id, resume=resume, fresh=fresh, gate=gate) is None:
        raise ClientError(409, "run_busy", f"run {run.id} is already working")


async def _segment(
    platform: Platform,
    runner: AgentRunner,
    run: AgentRun,
    gate: TokenGate,
    mode: Mode,
    resume: Any = None,
    fresh: bool = False,
) -> Outcome:
    """Run the next segment, its LLM calls charged through `gate` whether the caller waits,
    streams, leaves or runs it in the background."""
    await _claim(runner, run, gate, resume, fresh)
    if mode == "stream":
        # NOTE: subscribed before the segment's first await, so that no event is missed.
        return runner.live.stream(run.id, runner.live.subscribe(run.id))
    if mode == "background":
        return run_dict(run, trace=False)
    await runner.wait(run.id)
    with platform.sessions() as session:
        return run_dict(run_or_404(session, run.tenant_id, run.id))


async def start_run(
    platform: Platform,
    runner: AgentRunner,
    tenant: uuid.UUID,
    request: RunRequest,
    gate: TokenGate,
    mode: Mode,
) -> Outcome:
    """Create a run and start its first segment."""
    await ready_runner(runner)
    run = create_run(platform, tenant, request)
    return await _segment(platform, runner, run, gate, mode, fresh=True)


def _check_tool_outputs(run: AgentRun, outputs: list[ToolOutput]) -> dict[str, str]:
    """The outputs by call id; 409 unless the run waits for client tools, 400 unless one per call."""
    action = run.required_action or {}
    if run.status != WAITING or action.get("type") != "requires_action":
        raise ClientError(
            409, "not_waiting_for_tool_outputs", f"run {run.id} is {run.status}, not waiting for tools"
        )
    pending = {c["id"] for c in action["tool_calls"]}
    given = {o.tool_call_id: o.output for o in outputs}
    if set(given) != pending:
        raise ClientError(
            400,
            "tool_outputs_mismatch",
            "give exactly one output per pending tool call",
            {"pending": sorted(pending), "given": sorted(given)},
        )
    return given


async def submit_tool_outputs(
    platform: Platform,
    runner: AgentRunner,
    tenant: uuid.UUID,
    run_id: uuid.UUID,
    outputs: list[ToolOutput],
    gate: TokenGate,
    mode: Mode,
) -> Outcome:
    """Resume a run waiting for its client tool calls with their outputs."""
    await ready_runner(runner)
    with platform.sessions() as session:
        run = run_or_404(session, tenant, run_id)
        given = _check_tool_outputs(run, outputs)
    return await _segment(platform, runner, run, gate, mode, resume=given)


async def review_plan(
    platform: Platform,
    runner: AgentRunner,
    tenant: uuid.UUID,
    run_id: uuid.UUID,
    plan: list | None,
    gate: TokenGate,
    mode: Mode,
) -> Outcome:
    """Resume a run paused for review with its plan approved (`plan` None) or replaced."""
    most = platform.settings.agents.max_plan_steps
    if plan is not None and len(plan) > most:
        raise ClientError(
            422, "invalid_plan", f"the plan has {len(plan)} steps; at most {most} (agents.max_plan_steps)"
        )
    await ready_runner(runner)
    with platform.sessions() as session:
        run = run_or_404(session, tenant, run_id)
    if run.status != WAITING or (run.required_action or {}).get("type") != "review_plan":
        raise ClientError(
            409, "not_waiting_for_review", f"run {run_id} is {run.status}, not waiting for a review"
        )
    if plan is not None:
        try:
            PLAN_CHECKS[run.agent](plan, await runner.deps(run))
        except ValueError as exc:
            raise ClientError(422, "invalid_plan", str(exc)) from exc
    return await _segment(platform, runner, run, gate, mode, resume={"plan": plan})


async def cancel_run(platform: Platform, runner: AgentRunner, tenant: uuid.UUID, run_id: uuid.UUID) -> dict:
    """Stop a run that is working or waiting (finish_reason `cancelled`); 409 once it has finished."""
    await ready_runner(runner)
    with platform.sessions() as session:
        run = run_or_404(session, tenant, run_id)
        if run.finished_at is not None:
            raise ClientError(409, "run_finished", f"run {run_id} already finished ({run.finish_reason})")
        await runner.cancel(run, session)
        session.refresh(run)
        return run_dict(run)


async def chat_events(
    platform: Platform,
    runner: AgentRunner,
    tenant: uuid.UUID,
    kind: str,
    request: RunRequest,
    gate: TokenGate,
) -> AsyncIterator[dict]:
    """A run of agent `kind` as chat-completion events (`token`, then `done` with citations and usage)."""
    if kind not in KINDS:
        raise ClientError(
            400, "model_not_found", f"unknown agent {kind!r}: use agent/{' | agent/'.join(KINDS)}"
        )
    events = await start_run(
        platform, runner, tenant, request.model_copy(update={"agent": kind}), gate, "stream"
    )
    async for event in events:
        if event["type"] != "final":
            continue
        usage = event["usage"] or {}
        prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
        text = event["answer"] or f"(no answer: {event['finish_reason']}: {event['detail']})"
        yield {"type": "token", "text": text}
        yield {
            "type": "done",
            "answer": text,
            "citations": event["citations"],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
            "finish_reason": "stop" if event["finish_reason"] == "answered" else "length",
            "agent_run_id": event["id"],
            "model": event["model"],
            "escalations": event["escalations"],
            "claims": event["claims"],
            "charged": True,  # each LLM call was, by the run
        }
