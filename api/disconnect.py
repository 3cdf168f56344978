"""Work for a client that is still there: a non-streamed answer stops when its client leaves.

A streamed response notices a gone client when a write fails; a non-streamed one writes only at
the end, so without this a client that timed out held its answer slot and the engine until the
whole answer was made (175 s measured). The work is cancelled, which closes the event streams
under it: the engine aborts the request and the tokens made so far are settled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from fastapi import Request

from core.errors import ClientError

T = TypeVar("T")


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """`work`'s result; cancelled, with a 499, as soon as the client disconnects.

    NOTE: waits on `request.receive()` (after the body, the next message is the disconnect) rather
    than polling `is_disconnected()`, which under `BaseHTTPMiddleware` never sees it: the
    middleware's receive is cancelled before it reaches the server.
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(request.receive())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            return task.result()
        if watcher.result().get("type") == "http.disconnect":
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            raise ClientError(499, "client_closed_request", "the client closed the connection")
        return await task  # NOTE: no other message comes after the body; wait for the work
    finally:
        for pending in (task, watcher):
            if not pending.done():
                pending.cancel()
