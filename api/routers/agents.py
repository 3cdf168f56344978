"""/v1/agents/runs: start agent runs, read their traces, answer their client tool calls, review plans."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError, field_validator
from sqlalchemy.orm import Session
from sse_starlette import ServerSentEvent

from agents.graphs import KINDS, PLAN_CHECKS
from agents.graphs.common import Budgets
from agents.mcp import allowed_servers
from agents.runs.runner import AgentRunner
from agents.runs.store import WAITING, get_run, list_runs, run_dict
from agents.tools import BUILTIN, DEFAULT_TOOLS, check_client_tools
from api.charging import AgentTokenGate
from api.deps import CurrentTenant, Principal, StateDep
from api.errors import ApiError
from api.metrics import record_escalations
from api.ratelimit import Meter, RateLimit, meter_of
from api.schemas.agents import AgentRunList, AgentRunOut, AgentRunSummary
from api.schemas.common import event_stream
from api.state import AppState
from api.streaming import event_source, sse
from core.models import AgentRun, Tenant
from usecases.lookups import get_collection

router = APIRouter(prefix="/v1/agents", tags=["agents"])
log = logging.getLogger("groundwork.agents")
AgentKind = Literal["react", "rewoo", "plan_execute"]
assert set(KINDS) == {"react", "rewoo", "plan_execute"}


class RunBody(BaseModel):
    agent: AgentKind = "react"
    input: str = Field(min_length=1, max_length=4000, description="The task.")
    collections: list[str] = Field(
        default_factory=list, description="Collections (ids or names); all if empty."
    )
    tools: list[str | dict[str, Any]] = Field(
        default_factory=list,
        description="Built-in tool names and/or client-side OpenAI function tools the caller runs.",
    )
    mcp_servers: list[str] = Field(
        default_factory=list,
        max_length=8,
        description="Allowlisted MCP servers (settings `mcp.servers`) whose tools the agent may use.",
    )
    budgets: Budgets = Field(default_factory=Budgets)
    review_plan: bool = Field(default=False, description="Pause after planning (rewoo, plan_execute).")
    stream: bool = False
    background: bool = Field(default=False, description="Return at once (202) instead of at the first stop.")

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, tools: list) -> list:
        unknown = [t for t in tools if isinstance(t, str) and t not in BUILTIN]
        if unknown:
            raise ValueError(f"unknown built-in tools {unknown}; known: {sorted(BUILTIN)}")
        check_client_tools([t for t in tools if isinstance(t, dict)])
        return tools


class ToolOutput(BaseModel):
    tool_call_id: str
    output: str = Field(max_length=20_000)


class ToolOutputsBody(BaseModel):
    tool_outputs: list[ToolOutput] = Field(min_length=1)
    stream: bool = False

    @field_validator("tool_outputs")
    @classmethod
    def _one_output_per_call(cls, outputs: list[ToolOutput]) -> list[ToolOutput]:
        ids = [o.tool_call_id for o in outputs]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"tool_call_id given more than once: {twice}")
        return outputs


class PlanBody(BaseModel):
    plan: list | None = Field(default=None, description="A replacement plan; omit to approve as is.")
    stream: bool = False


def agent_gate(state: AppState, meter: Meter, tenant: uuid.UUID) -> AgentTokenGate:
    """How a run's LLM calls are admitted: tokens on `meter`, answer slots of `tenant`."""
    return AgentTokenGate(meter, state.answer_slots, str(tenant))


def resumed_principal(run: AgentRun) -> Principal:
    """Who pays for a run resumed after a restart: its tenant, no key."""
    return Principal(run.tenant_id, None, frozenset())


def build_runner(state: AppState) -> AgentRunner:
    """The process's runner of agent runs (api.main.build_state); what it calls reads the state."""
    return AgentRunner(
        state.sessions,
        state.settings,
        state.database.url,
        lambda: state.llm.answer_models(),
        state.mcp_pool,
        lambda run: agent_gate(state, meter_of(state, resumed_principal(run)), run.tenant_id),
        lambda steps: record_escalations(state, "agent", steps),
    )


async def ready_runner(state: AppState) -> AgentRunner:
    """The runner, its checkpoint tables made (runs a dead process left are resumed by its
    recovery thread: agents/runs/recovery.py)."""
    await state.agent_runner.saver()
    return state.agent_runner


def start_segment(runner: AgentRunner, run: AgentRun, gate, resume: Any = None, fresh: bool = False) -> None:
    """Claim the run and start its next segment; 409 if a segment (here or in another API
    process) holds it: two callers answered the same pause at once."""
    if runner.start(run.id, resume=resume, fresh=fresh, gate=gate) is None:
        raise ApiError(409, "run_busy", f"run {run.id} is already working")


def check_mcp_servers(state: AppState, session: Session, tenant: uuid.UUID, names: list[str]) -> list[str]:
    if not names:
        return []
    try:
        row = session.get(Tenant, tenant)
        return allowed_servers(state.settings.mcp, tenant, row.name if row else "", names)
    except ValueError as exc:
        raise ApiError(422, "mcp_server_not_allowed", str(exc)) from None


def check_client_tool_sizes(tools: list[dict], limit: int) -> None:
    """422 for a client tool too large to offer (see `agents.max_client_tool_chars`)."""
    for tool in tools:
        size = len(json.dumps(tool))
        if size > limit:
            name = (tool.get("function") or {}).get("name")
            raise ApiError(
                422,
                "tool_too_large",
                f"client tool {name!r} is {size} characters of JSON; at most {limit} "
                "(agents.max_client_tool_chars): its schema goes into every prompt and grammar",
            )


async def create_run(state: AppState, session: Session, tenant: uuid.UUID, body: RunBody) -> AgentRun:
    check_client_tool_sizes(
        [t for t in body.tools if isinstance(t, dict)], state.settings.agents.max_client_tool_chars
    )
    collections = [get_collection(session, tenant, ref) for ref in dict.fromkeys(body.collections)]
    servers = check_mcp_servers(state, session, tenant, body.mcp_servers)
    # `tools` is exactly what the agent may use; without it (and MCP servers), the default built-ins.
    builtin = [t for t in body.tools if isinstance(t, str)] if body.tools or servers else list(DEFAULT_TOOLS)
    run = AgentRun(
        tenant_id=tenant,
        agent=body.agent,
        status="queued",
        input=body.input,
        collection_ids=[str(c.id) for c in collections],
        tools=list(dict.fromkeys(builtin)),
        client_tools=[t for t in body.tools if isinstance(t, dict)],
        mcp_servers=servers,
        budgets=body.budgets.model_dump(),
        review_plan=body.review_plan,
        plan=[],
        trace=[],
        required_action={},
        citations=[],
        usage={},
    )
    session.add(run)
    session.commit()
    return run


async def advance(
    state: AppState,
    session: Session,
    run: AgentRun,
    stream: bool,
    meter: Meter,
    background: bool = False,
    resume: Any = None,
    fresh: bool = False,
):
    """Run the next segment; stream its events, return at once, or return the run at its next stop.
    Every segment is admitted by the rate limits, and each of its LLM calls charged to the caller
    (api/charging.py), whether the caller waits, streams, leaves or runs it in the background."""
    runner = await ready_runner(state)
    start_segment(runner, run, agent_gate(state, meter, run.tenant_id), resume, fresh)
    queue = runner.live.subscribe(run.id) if stream else None  # (before the segment's first await)
    if stream:
        return event_source(_sse(runner.live.stream(run.id, queue)))
    if background:
        return JSONResponse(run_dict(run, trace=False), status_code=202)
    await runner.wait(run.id)
    session.refresh(run)
    return run_dict(run)


async def _sse(events: AsyncIterator[dict]) -> AsyncIterator[ServerSentEvent]:
    async for event in events:
        yield sse(event["type"], event)


_STREAMED = event_stream("The run's events: `event: <type>`, `data: <the event's JSON>`.")


def run_or_404(session: Session, tenant: uuid.UUID, run_id: uuid.UUID) -> AgentRun:
    run = get_run(session, tenant, run_id)
    if run is None:
        raise ApiError(404, "run_not_found", f"no agent run {run_id}")
    return run


def check_tool_outputs(run: AgentRun, outputs: list[ToolOutput]) -> dict[str, str]:
    """The outputs by call id; 409 unless the run waits for client tools, 400 unless one per call."""
    action = run.required_action or {}
    if run.status != WAITING or action.get("type") != "requires_action":
        raise ApiError(
            409, "not_waiting_for_tool_outputs", f"run {run.id} is {run.status}, not waiting for tools"
        )
    pending = {c["id"] for c in action["tool_calls"]}
    given = {o.tool_call_id: o.output for o in outputs}
    if set(given) != pending:
        raise ApiError(
            400,
            "tool_outputs_mismatch",
            "give exactly one output per pending tool call",
            {"pending": sorted(pending), "given": sorted(given)},
        )
    return given


@router.post("/runs", response_model=AgentRunOut, responses={202: {"model": AgentRunSummary}, **_STREAMED})
async def start_run(body: RunBody, tenant: CurrentTenant, state: StateDep, meter: RateLimit):
    """Start an agent run; streams its steps (SSE) with `stream`, else returns it at its first stop."""
    await ready_runner(state)
    with state.sessions() as session:
        run = await create_run(state, session, tenant, body)
        return await advance(state, session, run, body.stream, meter, body.background, fresh=True)


@router.get("/runs", response_model=AgentRunList)
def get_runs(
    tenant: CurrentTenant, state: StateDep, limit: int = Query(20, ge=1, le=100), status: str | None = None
):
    """The tenant's runs, newest first (without traces)."""
    with state.sessions() as session:
        return {
            "object": "list",
            "data": [run_dict(r, trace=False) for r in list_runs(session, tenant, limit, status)],
        }


@router.get("/runs/{run_id}", response_model=AgentRunOut)
def get_one(run_id: uuid.UUID, tenant: CurrentTenant, state: StateDep):
    """One run with its full trace: steps, calls, observations, tokens, timings."""
    with state.sessions() as session:
        return run_dict(run_or_404(session, tenant, run_id))


@router.post("/runs/{run_id}/tool_outputs", response_model=AgentRunOut, responses=_STREAMED)
async def submit_tool_outputs(
    run_id: uuid.UUID, body: ToolOutputsBody, tenant: CurrentTenant, state: StateDep, meter: RateLimit
):
    """Give the outputs of the client tool calls a run is waiting for; the run resumes."""
    await ready_runner(state)  # NOTE: before any session: its first use may create tables (DDL waits)
    with state.sessions() as session:
        run = run_or_404(session, tenant, run_id)
        given = check_tool_outputs(run, body.tool_outputs)
        return await advance(state, session, run, body.stream, meter, resume=given)


@router.post("/runs/{run_id}/plan", response_model=AgentRunOut, responses=_STREAMED)
async def review_plan(
    run_id: uuid.UUID, body: PlanBody, tenant: CurrentTenant, state: StateDep, meter: RateLimit
):
    """Approve (no `plan`) or replace the plan of a run paused for review; the run resumes."""
    most = state.settings.agents.max_plan_steps
    if body.plan is not None and len(body.plan) > most:
        raise ApiError(
            422,
            "invalid_plan",
            f"the plan has {len(body.plan)} steps; at most {most} (agents.max_plan_steps)",
        )
    await ready_runner(state)  # NOTE: before any session (see submit_tool_outputs)
    with state.sessions() as session:
        run = run_or_404(session, tenant, run_id)
        if run.status != WAITING or (run.required_action or {}).get("type") != "review_plan":
            raise ApiError(
                409, "not_waiting_for_review", f"run {run_id} is {run.status}, not waiting for a review"
            )
        if body.plan is not None:
            try:
                PLAN_CHECKS[run.agent](body.plan, await state.agent_runner.deps(run))
            except ValueError as exc:
                raise ApiError(422, "invalid_plan", str(exc)) from exc
        return await advance(state, session, run, body.stream, meter, resume={"plan": body.plan})


@router.post("/runs/{run_id}/cancel", response_model=AgentRunOut)
async def cancel_run(run_id: uuid.UUID, tenant: CurrentTenant, state: StateDep):
    """Stop a run that is working or waiting; it ends with finish_reason `cancelled`."""
    runner = await ready_runner(state)  # NOTE: before any session (see submit_tool_outputs)
    with state.sessions() as session:
        run = run_or_404(session, tenant, run_id)
        if run.finished_at is not None:
            raise ApiError(409, "run_finished", f"run {run_id} already finished ({run.finish_reason})")
        await runner.cancel(run, session)
        session.refresh(run)
        return run_dict(run)


async def chat_events(
    state: AppState, tenant: uuid.UUID, kind: str, task: str, collections: list[str], meter: Meter
) -> AsyncIterator[dict]:
    """An agent run as chat-completion events (`token`, then `done` with citations and usage)."""
    if kind not in KINDS:
        raise ApiError(400, "model_not_found", f"unknown agent {kind!r}: use agent/{' | agent/'.join(KINDS)}")
    try:
        body = RunBody(agent=kind, input=task, collections=collections)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "messages[-1].content" if first["loc"][:1] == ("input",) else ".".join(map(str, first["loc"]))
        raise ApiError(422, "validation_error", f"{where}: {first['msg']}") from None
    runner = await ready_runner(state)
    with state.sessions() as session:
        run = await create_run(state, session, tenant, body)
    start_segment(runner, run, agent_gate(state, meter, tenant), fresh=True)
    queue = runner.live.subscribe(run.id)
    async for event in runner.live.stream(run.id, queue):
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
            "charged": True,  # each LLM call was, by the run
        }
