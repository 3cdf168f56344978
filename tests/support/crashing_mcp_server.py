"""An MCP server (stdio) whose one tool kills its own process: a server that dies mid-run."""

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("crashy")


@server.tool()
def lookup_plan(customer: str) -> str:
    """Look up a customer's plan by their name."""
    os._exit(3)


if __name__ == "__main__":
    server.run()
