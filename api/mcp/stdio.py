"""MCP over stdio, for hosts that launch a command (`groundwork mcp serve --stdio`).

The process talks to the database itself, as the API does, and acts for one API key: the key is
checked as a REST request's would be, at start and again on every call (a revoked key stops
working mid-session), with the same scopes, tenant and rate limits.
"""

from __future__ import annotations

from mcp.server.stdio import stdio_server
from starlette.requests import Request

from api.main import build_state
from api.mcp.http import authenticate
from api.mcp.server import build_server
from api.mcp.tools import Caller
from core.settings import Settings


def key_request(key: str | None) -> Request:
    """A stand-in HTTP request carrying the key, for the code REST uses (auth, rate limits)."""
    headers = [(b"authorization", f"Bearer {key}".encode())] if key else []
    return Request({"type": "http", "method": "POST", "path": "/mcp", "headers": headers})


async def serve_stdio(settings: Settings, key: str | None) -> None:
    """Serve until stdin closes; ClientError (401) at once when the key is refused."""
    state = build_state(settings)
    request = key_request(key)
    try:
        authenticate(request, state)
        server = build_server(lambda _ctx: Caller(state, authenticate(request, state), request))
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        await state.aclose()
