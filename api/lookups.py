"""Lookups that several routers share (routers never import each other)."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from agents.mcp import servers_for
from api.errors import ApiError
from core.models import Collection, Tenant
from core.settings.mcp import McpServerConfig, McpSettings


def get_collection(session: Session, tenant: uuid.UUID, ref: str) -> Collection:
    """By id or by name, within the tenant; 404 otherwise."""
    query = select(Collection).where(Collection.tenant_id == tenant)
    try:
        query = query.where(Collection.id == uuid.UUID(ref))
    except ValueError:
        query = query.where(Collection.name == ref)
    collection = session.execute(query).scalar_one_or_none()
    if collection is None:
        raise ApiError(404, "collection_not_found", f"no collection {ref!r}")
    return collection


def tenant_servers(session: Session, knobs: McpSettings, tenant: uuid.UUID) -> list[McpServerConfig]:
    """The allowlisted MCP servers `tenant`'s agent runs may name (none is started)."""
    row = session.get(Tenant, tenant)
    return servers_for(knobs, tenant, row.name if row else "")
