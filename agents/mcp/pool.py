"""MCP server connections started, reused and stopped by the platform, bounded in number.

Each connection is one `mcp.Client` held open by its own task (the SDK's client is an async context
whose task group must be entered and left by the same task); callers share it. A stdio server is a
subprocess started with only the SDK's safe environment (PATH, HOME, ...) plus its configured
`env`: it never sees the platform's database URL or keys. A connection that fails, or whose call
fails or times out, is dropped and started again on next use; beyond `max_processes` the least
recently used idle connection is closed, and connections unused for `idle_s` are closed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import mcp_types as types
from mcp import Client, StdioServerParameters

from core.settings.mcp import McpServerConfig, McpSettings

log = logging.getLogger("groundwork.agents.mcp")
MAX_TOOL_PAGES = 20  # a server paging its tools forever cannot hold a run


class McpUnavailable(RuntimeError):
    """The server could not be started or reached, or died."""


class _Connection:
    def __init__(self, config: McpServerConfig, knobs: McpSettings) -> None:
        self.config, self.knobs = config, knobs
        self.client: Client | None = None
        self.tools: list[types.Tool] = []
        self.error: BaseException | None = None
        self.ready, self._stop = asyncio.Event(), asyncio.Event()
        self.closed = False
        self.busy = 0
        self.last_used = time.monotonic()
        self.task = asyncio.create_task(self._hold(), name=f"mcp:{config.name}")

    def _target(self) -> StdioServerParameters | str:
        c = self.config
        return (
            c.url if c.url else StdioServerParameters(command=c.command or "", args=c.args, env=c.env or None)
        )

    async def _hold(self) -> None:
        try:
            async with Client(self._target(), read_timeout_seconds=self.knobs.call_timeout_s) as client:
                self.tools = await _list_tools(client)
                self.client = client
                self.ready.set()
                await self._stop.wait()
        except Exception as exc:  # the server is gone: what callers see is McpUnavailable
            self.error = _leaf(exc)
            log.warning("MCP server %s stopped: %r", self.config.name, self.error)
        finally:
            self.client, self.closed = None, True
            self.ready.set()

    def close(self) -> None:
        self._stop.set()
        if not self.ready.is_set():  # still starting (a server that never answers): stop waiting on it
            self.task.cancel()


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside the SDK's task-group exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def _list_tools(client: Client) -> list[types.Tool]:
    tools, cursor = [], None
    for _ in range(MAX_TOOL_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


class McpPool:
    def __init__(self, knobs: McpSettings) -> None:
        self.knobs = knobs
        self.connections: dict[str, _Connection] = {}
        self._lock = asyncio.Lock()
        self._holding: set[asyncio.Task] = set()  # every connection's task, dropped ones included

    async def _connection(self, name: str) -> _Connection:
        config = self.knobs.server(name)
        if config is None:
            raise McpUnavailable(f"no MCP server {name!r} is configured")
        async with self._lock:
            self._close_idle()
            conn = self.connections.get(name)
            if conn is None or conn.closed:
                self._make_room()
                conn = self.connections[name] = _Connection(config, self.knobs)
                self._holding.add(conn.task)
                conn.task.add_done_callback(self._holding.discard)
        try:
            async with asyncio.timeout(self.knobs.connect_timeout_s):
                await conn.ready.wait()
        except TimeoutError:
            self._drop(name, conn)
            raise McpUnavailable(
                f"MCP server {name!r} did not start in {self.knobs.connect_timeout_s:g} s"
            ) from None
        if conn.client is None:
            self._drop(name, conn)
            raise McpUnavailable(f"MCP server {name!r} is not available: {conn.error}")
        conn.last_used = time.monotonic()
        return conn

    async def tools(self, name: str) -> list[types.Tool]:
        """The server's tools (listed once per connection), less those the operator did not allow."""
        conn = await self._connection(name)
        allowed = conn.config.tools
        return [t for t in conn.tools if allowed is None or t.name in allowed]

    async def call(
        self, name: str, tool: str, arguments: dict[str, Any], timeout: float
    ) -> types.CallToolResult:
        conn = await self._connection(name)
        conn.busy += 1
        try:
            async with asyncio.timeout(min(timeout, self.knobs.call_timeout_s)):
                return await conn.client.call_tool(tool, arguments)  # type: ignore[union-attr]
        except TimeoutError:
            self._drop(name, conn)
            raise McpUnavailable(f"MCP server {name!r} did not answer {tool} in time") from None
        except Exception as exc:
            self._drop(name, conn)
            raise McpUnavailable(
                f"MCP server {name!r} failed during {tool}: {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            conn.busy -= 1
            conn.last_used = time.monotonic()

    def running(self) -> list[str]:
        return [n for n, c in self.connections.items() if not c.closed]

    def shutdown(self) -> None:
        """Tell every server to stop (without waiting: see `aclose`)."""
        for name, conn in list(self.connections.items()):
            self._drop(name, conn)

    async def aclose(self, grace_s: float = 15.0) -> None:
        """Stop every server and wait until their connections have ended (the app's shutdown).

        NOTE: awaited, not left to the event loop's teardown: there a connection still closing was
        cancelled inside the SDK's shielded stdio exit and the loop never finished (a hung test run).
        """
        self.shutdown()
        if self._holding:
            await asyncio.wait(self._holding, timeout=grace_s)

    def _drop(self, name: str, conn: _Connection) -> None:
        conn.close()
        if self.connections.get(name) is conn:
            del self.connections[name]

    def _close_idle(self) -> None:
        now = time.monotonic()
        for name, conn in list(self.connections.items()):
            if conn.closed or (not conn.busy and now - conn.last_used > self.knobs.idle_s):
                self._drop(name, conn)

    def _make_room(self) -> None:
        while len(self.connections) >= self.knobs.max_processes:
            idle = [(c.last_used, n) for n, c in self.connections.items() if not c.busy]
            if not idle:
                raise McpUnavailable(f"{self.knobs.max_processes} MCP servers are busy; try again later")
            _, name = min(idle)
            self._drop(name, self.connections[name])
