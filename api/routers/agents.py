"""/v1/agents/runs: start agent runs, read their traces, answer their client tool calls, review plans.

Adapters of usecases/agent_runs.py and agent_segments.py: they authenticate, meter and shape the
response (the run, a 202 summary, or its events as SSE)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, field_validator
from sse_starlette import ServerSentEvent

from api.agent_runner import agent_gate
from api.deps import CurrentTenant, StateDep
from api.ratelimit import RateLimit
from api.schemas.agents import AgentRunList, AgentRunOut, AgentRunSummary
from api.schemas.common import event_stream
from api.streaming import event_source, sse
from usecases import agent_segments as segments
from usecases.agent_runs import RunRequest, ToolOutput, read_run, read_runs

router = APIRouter(prefix="/v1/agents", tags=["agents"])


class RunBody(RunRequest):
    stream: bool = False
    background: bool = Field(default=False, description="Return at once (202) instead of at the first stop.")


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


def _mode(stream: bool, background: bool = False) -> segments.Mode:
    return "stream" if stream else "background" if background else "wait"


def _respond(outcome: segments.Outcome, mode: segments.Mode):
    """The run at its stop, its summary at once (202), or its events (SSE)."""
    if mode == "stream":
        return event_source(_sse(outcome))
    return JSONResponse(outcome, status_code=202) if mode == "background" else outcome


async def _sse(events: AsyncIterator[dict]) -> AsyncIterator[ServerSentEvent]:
    async for event in events:
        yield sse(event["type"], event)


_STREAMED = event_stream("The run's events: `event: <type>`, `data: <the event's JSON>`.")


@router.post("/runs", response_model=AgentRunOut, responses={202: {"model": AgentRunSummary}, **_STREAMED})
async def start_run(body: RunBody, tenant: CurrentTenant, state: StateDep, meter: RateLimit):
    """Start an agent run; streams its steps (SSE) with `stream`, else returns it at its first stop."""
    gate, mode = agent_gate(state, meter, tenant), _mode(body.stream, body.background)
    return _respond(await segments.start_run(state, state.agent_runner, tenant, body, gate, mode), mode)


@router.get("/runs", response_model=AgentRunList)
def get_runs(
    tenant: CurrentTenant, state: StateDep, limit: int = Query(20, ge=1, le=100), status: str | None = None
):
    """The tenant's runs, newest first (without traces)."""
    return {"object": "list", "data": read_runs(state, tenant, limit, status)}


@router.get("/runs/{run_id}", response_model=AgentRunOut)
def get_one(run_id: uuid.UUID, tenant: CurrentTenant, state: StateDep):
    """One run with its full trace: steps, calls, observations, tokens, timings."""
    return read_run(state, tenant, run_id)


@router.post("/runs/{run_id}/tool_outputs", response_model=AgentRunOut, responses=_STREAMED)
async def submit_tool_outputs(
    run_id: uuid.UUID, body: ToolOutputsBody, tenant: CurrentTenant, state: StateDep, meter: RateLimit
):
    """Give the outputs of the client tool calls a run is waiting for; the run resumes."""
    gate, mode = agent_gate(state, meter, tenant), _mode(body.stream)
    outcome = await segments.submit_tool_outputs(
        state, state.agent_runner, tenant, run_id, body.tool_outputs, gate, mode
    )
    return _respond(outcome, mode)


@router.post("/runs/{run_id}/plan", response_model=AgentRunOut, responses=_STREAMED)
async def review_plan(
    run_id: uuid.UUID, body: PlanBody, tenant: CurrentTenant, state: StateDep, meter: RateLimit
):
    """Approve (no `plan`) or replace the plan of a run paused for review; the run resumes."""
    gate, mode = agent_gate(state, meter, tenant), _mode(body.stream)
    outcome = await segments.review_plan(state, state.agent_runner, tenant, run_id, body.plan, gate, mode)
    return _respond(outcome, mode)


@router.post("/runs/{run_id}/cancel", response_model=AgentRunOut)
async def cancel_run(run_id: uuid.UUID, tenant: CurrentTenant, state: StateDep):
    """Stop a run that is working or waiting; it ends with finish_reason `cancelled`."""
    return await segments.cancel_run(state, state.agent_runner, tenant, run_id)
