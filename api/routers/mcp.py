"""GET /v1/mcp: the MCP endpoint and its tools, and the MCP servers this tenant's agents may use."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel

from agents.mcp.pool import McpUnavailable
from api.deps import CurrentTenant, SessionDep, StateDep
from api.lookups import tenant_servers
from api.mcp.http import PATH
from api.mcp.server import tool_list

router = APIRouter(prefix="/v1", tags=["mcp"])


class ToolOut(BaseModel):
    name: str
    description: str


class ServerOut(BaseModel):
    name: str
    transport: Literal["stdio", "http"]
    tools: list[ToolOut]
    error: str | None = None


class McpOut(BaseModel):
    endpoint: str | None  # None when the server is switched off
    tools: list[ToolOut]
    servers: list[ServerOut]


@router.get("/mcp", response_model=McpOut)
async def mcp_overview(tenant: CurrentTenant, session: SessionDep, state: StateDep) -> McpOut:
    """The platform's MCP endpoint and tools; the allowlisted servers with their tools (started if
    need be, so a server that cannot start shows its error)."""
    knobs = state.settings.mcp
    configs = tenant_servers(session, knobs, tenant)
    session.commit()  # NOTE: no transaction held while servers start
    servers = []
    for config in configs:
        out = ServerOut(name=config.name, transport="http" if config.url else "stdio", tools=[])
        try:
            listed = await state.mcp_pool.tools(config.name)
            out.tools = [ToolOut(name=t.name, description=t.description or "") for t in listed]
        except McpUnavailable as exc:
            out.error = str(exc)
        servers.append(out)
    ours = [ToolOut(name=t.name, description=t.description or "") for t in tool_list()]
    return McpOut(endpoint=PATH if knobs.server_enabled else None, tools=ours, servers=servers)
