"""MCP servers as a source of agent tools: the operator's allowlist, the connection pool, the tools."""

from agents.mcp.allowlist import allowed_servers, servers_for
from agents.mcp.pool import McpPool
from agents.mcp.toolbox import McpToolbox

__all__ = ["McpPool", "McpToolbox", "allowed_servers", "servers_for"]
