"""Blocking work (SQL on a sync session, embedding) off the event loop, safely for the session.

`asyncio.to_thread` alone is not enough where the thread uses a session the coroutine also uses:
cancelled (a client gone, a run cancelled), the coroutine's `finally` would close or commit the
session while the thread still runs a statement on it. `off_loop` waits for the thread first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


async def off_loop(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn(*args, **kwargs)` in a worker thread (context variables go along, as with to_thread).

    NOTE: a cancel arriving meanwhile is raised only once the thread has returned, so that no
    session is ever used by two threads at once; the thread's result is then dropped."""
    work = asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs))
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(work)
        except asyncio.CancelledError:
            if work.done():  # the thread is over: what cancelled us may be raised now
                raise
            cancelled = True
            continue
        if cancelled:
            raise asyncio.CancelledError
        return result
