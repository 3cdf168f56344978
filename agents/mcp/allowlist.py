"""Which of the operator's MCP servers a tenant's run may name."""

from __future__ import annotations

import uuid

from core.settings.mcp import McpSettings


def allowed_servers(
    knobs: McpSettings, tenant_id: uuid.UUID, tenant_name: str, names: list[str]
) -> list[str]:
    """The names, deduplicated; ValueError naming those not allowlisted for this tenant (a server
    limited to other tenants reads as unknown, so a tenant learns nothing of others' servers)."""
    wanted = list(dict.fromkeys(names))
    refused = [
        n
        for n in wanted
        if (config := knobs.server(n)) is None
        or (config.tenants is not None and not {str(tenant_id), tenant_name} & set(config.tenants))
    ]
    if refused:
        mine = [
            s.name
            for s in knobs.servers
            if s.tenants is None or {str(tenant_id), tenant_name} & set(s.tenants)
        ]
        raise ValueError(f"MCP servers not allowlisted for this tenant: {refused}; allowed: {mine}")
    return wanted
