"""GET /v1/agents/tools: what a run can be given, for clients that build the start request (the UI's
start form): the built-in tools with their argument schemas, the default set, the MCP servers the
tenant's runs may name, and the budgets' limits as JSON Schema."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

from agents.graphs.common import Budgets
from agents.tools import BUILTIN, DEFAULT_TOOLS
from api.deps import ReadingTenant, SessionDep, StateDep
from api.lookups import tenant_servers

router = APIRouter(prefix="/v1/agents", tags=["agents"])


class BuiltinToolOut(BaseModel):
    name: str
    description: str
    parameters: dict
    default: bool


class AgentToolsOut(BaseModel):
    builtin: list[BuiltinToolOut]
    mcp_servers: list[str]  # allowlisted for this tenant (settings mcp.servers): a run's `mcp_servers`
    budgets: dict


@router.get("/tools", response_model=AgentToolsOut)
def agent_tools(tenant: ReadingTenant, session: SessionDep, state: StateDep):
    tools = [
        BuiltinToolOut(
            name=t.name, description=t.description, parameters=t.schema(), default=t.name in DEFAULT_TOOLS
        )
        for t in BUILTIN.values()
    ]
    servers = [s.name for s in tenant_servers(session, state.settings.mcp, tenant)]
    return AgentToolsOut(builtin=tools, mcp_servers=servers, budgets=Budgets.model_json_schema())
