"""The app's one pool of MCP server connections (agents' tools, the admin panel's listing)."""

from __future__ import annotations

from agents.mcp import McpPool
from api.state import AppState


def mcp_pool(state: AppState) -> McpPool:
    """NOTE: in `extras`, so the app's shutdown stops the servers (`McpPool.aclose`)."""
    return state.extras.setdefault("mcp_pool", McpPool(state.settings.mcp))
