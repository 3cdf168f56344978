"""Which of the operator's MCP servers a tenant's run may name."""

from __future__ import annotations

import uuid

from core.settings.mcp import McpServerConfig, McpSettings


def servers_for(knobs: McpSettings, tenant_id: uuid.UUID, tenant_name: str) -> list[McpServerConfig]:
    """The servers open to every tenant, and those that list this tenant (by id or name)."""
    names = {str(tenant_id), tenant_name}
    return [s for s in knobs.servers if s.tenants is None or names & set(s.tenants)]


def allowed_servers(
    knobs: McpSettings, tenant_id: uuid.UUID, tenant_name: str, names: list[str]
) -> list[str]:
    """The names, deduplicated; ValueError naming those not allowlisted for this tenant (a server
    limited to other tenants reads as unknown, so a tenant learns nothing of others' servers)."""
    mine = [s.name for s in servers_for(knobs, tenant_id, tenant_name)]
    wanted = list(dict.fromkeys(names))
    refused = [n for n in wanted if n not in mine]
    if refused:
        raise ValueError(f"MCP servers not allowlisted for this tenant: {refused}; allowed: {mine}")
    return wanted
