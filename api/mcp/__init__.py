"""The platform as an MCP server: Streamable HTTP at /mcp (http.py) and stdio (cli `mcp serve`)."""
