"""Lookups that several routers share (routers never import each other); collections are looked up
by the use cases' `get_collection` (usecases/lookups.py)."""

from __future__ import annotations

import uuid

from sqlalchemy.orm import Session

from agents.mcp import servers_for
from core.models import Tenant
from core.settings.mcp import McpServerConfig, McpSettings


def tenant_servers(session: Session, knobs: McpSettings, tenant: uuid.UUID) -> list[McpServerConfig]:
    """The allowlisted MCP servers `tenant`'s agent runs may name (none is started)."""
    row = session.get(Tenant, tenant)
    return servers_for(knobs, tenant, row.name if row else "")
