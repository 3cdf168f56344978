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

from api.errors import ApiError

T = TypeVar("T")
POLL_S = 0.5


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """`work`'s result; cancelled, with a 499, as soon as the client disconnects."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=POLL_S)
            if done:
                return task.result()
            if await request.is_disconnected():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                raise ApiError(499, "client_closed_request", "the client closed the connection")
    finally:
        if not task.done():  # this handler itself was cancelled
            task.cancel()
