"""MCP over Streamable HTTP at /mcp: each HTTP request is authenticated as a REST request is
(`get_principal`: the same Bearer keys, 401 without one when auth is required), then served by the
SDK's session manager, stateless and with JSON responses: any API process can answer any request
(no sticky sessions), and a tool call is one POST, one answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from api.deps import Principal, get_principal
from api.errors import error_response
from api.mcp.server import build_server
from api.mcp.tools import Caller
from api.state import AppState
from core.errors import ClientError

PATH = "/mcp"
_PRINCIPAL = "groundwork.principal"


def _caller_of(ctx: ServerRequestContext) -> Caller:
    request: Request = ctx.request
    return Caller(request.app.state.groundwork, request.scope[_PRINCIPAL], request)


def authenticate(request: Request, state: AppState) -> Principal:
    """The request's principal as REST finds it; ClientError 401 for a missing or bad key."""
    with state.sessions() as session:
        return get_principal(request, session, state.settings, state, None)


class McpEndpoint:
    """The ASGI app mounted at /mcp; `running()` holds the SDK's session manager for the app's life."""

    def __init__(self) -> None:
        self.server = build_server(_caller_of)
        self.manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        # NOTE: a manager runs once; an app started again (tests) gets a new one.
        self.manager = StreamableHTTPSessionManager(self.server, json_response=True, stateless=True)
        async with self.manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        state: AppState = request.app.state.groundwork
        try:
            principal = await asyncio.to_thread(authenticate, request, state)
        except ClientError as exc:
            response = error_response(exc.status, exc.code, exc.message, exc.details, exc.headers)
            await response(scope, receive, send)
            return
        scope[_PRINCIPAL] = principal
        await self.manager.handle_request(scope, receive, send)


def mount(app: FastAPI) -> McpEndpoint:
    """Serve MCP at exactly /mcp (a mount would redirect /mcp to /mcp/)."""
    endpoint = McpEndpoint()
    app.router.routes.append(Route(PATH, endpoint, include_in_schema=False))
    return endpoint
