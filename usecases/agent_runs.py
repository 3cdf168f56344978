"""Agent runs: what a run may be asked to do, creating one, and reading runs back.

The use case behind `POST /v1/agents/runs`, `agent/<kind>` chat completions and the MCP agent tools;
running a run's segments (start, resume, review, cancel) is `usecases/agent_segments.py`. Each
function owns its session; the adapters authenticate, meter and shape the response.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator
from sqlalchemy.orm import Session

from agents.graphs import KINDS
from agents.graphs.common import Budgets
from agents.mcp import allowed_servers
from agents.runs.store import get_run, list_runs, run_dict
from agents.tools import BUILTIN, DEFAULT_TOOLS, check_client_tools
from core.errors import ClientError
from core.models import AgentRun, Tenant
from usecases.lookups import get_collection
from usecases.platform import Platform

AgentKind = Literal["react", "rewoo", "plan_execute"]
assert set(KINDS) == {"react", "rewoo", "plan_execute"}


class RunRequest(BaseModel):
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


def _check_mcp_servers(
    platform: Platform, session: Session, tenant: uuid.UUID, names: list[str]
) -> list[str]:
    if not names:
        return []
    try:
        row = session.get(Tenant, tenant)
        return allowed_servers(platform.settings.mcp, tenant, row.name if row else "", names)
    except ValueError as exc:
        raise ClientError(422, "mcp_server_not_allowed", str(exc)) from None


def _check_client_tool_sizes(tools: list[dict], limit: int) -> None:
    """422 for a client tool too large to offer (see `agents.max_client_tool_chars`)."""
    for tool in tools:
        size = len(json.dumps(tool))
        if size > limit:
            name = (tool.get("function") or {}).get("name")
            raise ClientError(
                422,
                "tool_too_large",
                f"client tool {name!r} is {size} characters of JSON; at most {limit} "
                "(agents.max_client_tool_chars): its schema goes into every prompt and grammar",
            )


def create_run(platform: Platform, tenant: uuid.UUID, request: RunRequest) -> AgentRun:
    """A queued run (committed, detached); 404 for a collection outside the tenant, 422 for a client
    tool too large or an MCP server not allowed."""
    client_tools = [t for t in request.tools if isinstance(t, dict)]
    _check_client_tool_sizes(client_tools, platform.settings.agents.max_client_tool_chars)
    with platform.sessions() as session:
        collections = [get_collection(session, tenant, ref) for ref in dict.fromkeys(request.collections)]
        servers = _check_mcp_servers(platform, session, tenant, request.mcp_servers)
        # `tools` is exactly what the agent may use; without it (and MCP servers), the default built-ins.
        given = request.tools or servers
        builtin = [t for t in request.tools if isinstance(t, str)] if given else list(DEFAULT_TOOLS)
        run = AgentRun(
            tenant_id=tenant,
            agent=request.agent,
            status="queued",
            input=request.input,
            collection_ids=[str(c.id) for c in collections],
            tools=list(dict.fromkeys(builtin)),
            client_tools=client_tools,
            mcp_servers=servers,
            budgets=request.budgets.model_dump(),
            review_plan=request.review_plan,
            plan=[],
            trace=[],
            required_action={},
            citations=[],
            usage={},
        )
        session.add(run)
        session.commit()  # NOTE: the factory keeps attributes on commit: the run is read after close
    return run


def run_or_404(session: Session, tenant: uuid.UUID, run_id: uuid.UUID) -> AgentRun:
    run = get_run(session, tenant, run_id)
    if run is None:
        raise ClientError(404, "run_not_found", f"no agent run {run_id}")
    return run


def read_run(platform: Platform, tenant: uuid.UUID, run_id: uuid.UUID, trace: bool = True) -> dict:
    """One run of the tenant (with its full trace unless `trace` is off); 404 otherwise."""
    with platform.sessions() as session:
        return run_dict(run_or_404(session, tenant, run_id), trace=trace)


def read_runs(platform: Platform, tenant: uuid.UUID, limit: int, status: str | None) -> list[dict]:
    """The tenant's runs, newest first, without traces."""
    with platform.sessions() as session:
        return [run_dict(r, trace=False) for r in list_runs(session, tenant, limit, status)]
