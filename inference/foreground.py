"""Interactive work the in-process engine steps aside for.

On a small CPU machine generation keeps every core busy while any sequence runs (one tenant's agent
runs are enough), and a retrieval-only answer of another tenant then shares the cores, the memory
bandwidth and the caches with it: measured with `python -m benchmarks.fairness`, that answer's p95
doubled. Nice levels did not help (the cores are shared either way); pausing did. Nor did an
engine in a process of its own (`groundwork engine serve` at nice 19, the API its client): that
answer's p95 under the flood rose about as much, and the API's event loop then also read every
generated token off HTTP.

A request that wants the cores now (the API holds one for each answer and search, see
api/foreground.py) takes a `Hold`; the engine calls `Foreground.wait` between steps and between
decoder layers, and waits there while any hold is taken. A hold ends when its request ends or hands
its work to an engine (`release_current`, called as a request is queued): a request waiting on
generation holds nothing.

Async work that a busy tenant drives itself (its own requests, its agent runs' tool calls) does not
pause the engine but can still crowd the one event loop an interactive request needs: it awaits
`yield_to_holds` first, which returns when no hold is taken (or after `MAX_PAUSE_S`).

NOTE: the engine never waits for more than `share` of its time: the pause allowance grows by
share / (1 - share) of each second the engine runs, up to `MAX_PAUSE_S`, so a stream of answers
slows generation by at most that share and never stops it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# The longest single pause: about one retrieval-only answer on a loaded 2-core machine.
MAX_PAUSE_S = 0.25


class Hold:
    """One request's claim on the cores; `release` is idempotent."""

    def __init__(self, gate: Foreground) -> None:
        self._gate: Foreground | None = gate

    def release(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            gate._release()


# The hold of the request running in this context (asyncio tasks copy it), if any.
_current: ContextVar[Hold | None] = ContextVar("groundwork_foreground_hold", default=None)


def release_current() -> None:
    """The current request now waits on an engine: its hold, if any, ends."""
    hold = _current.get()
    if hold is not None:
        hold.release()


class Foreground:
    def __init__(self, share: float) -> None:
        if not 0 <= share < 1:
            raise ValueError("foreground share must be in [0, 1)")
        self.share = share
        self.paused_s = 0.0  # total time engines waited here (metrics, tests)
        self._held = 0
        self._lock = threading.Lock()
        self._clear = threading.Event()
        self._clear.set()
        self._allowance = MAX_PAUSE_S
        self._ran_since = time.monotonic()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = []

    @contextmanager
    def holding(self) -> Iterator[Hold]:
        """Hold the cores for the block (or until the request hands its work to an engine)."""
        hold = self.take()
        token = _current.set(hold)
        try:
            yield hold
        finally:
            _current.reset(token)
            hold.release()

    def take(self) -> Hold:
        with self._lock:
            self._held += 1
            self._clear.clear()
        return Hold(self)

    def _release(self) -> None:
        with self._lock:
            self._held -= 1
            if self._held > 0:
                return
            self._clear.set()
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            if not loop.is_closed():  # a waiter's loop may have ended (its wait_for went with it)
                loop.call_soon_threadsafe(_wake, future)

    async def yield_to_holds(self) -> None:
        """Wait while any hold is taken, at most MAX_PAUSE_S (holds are short: one retrieval)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._held == 0:
                return
            waiter = (loop, loop.create_future())
            self._waiters.append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter[1]), MAX_PAUSE_S)
        except TimeoutError:
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def wait(self) -> None:
        """Called by an engine thread between steps and layers: returns at once unless held.
        NOTE: engines of one process (a cascade's) share the allowance unlocked: a race only moves
        one pause's length, never past MAX_PAUSE_S."""
        if self._clear.is_set() or self.share == 0:
            return
        now = time.monotonic()
        ran, self._ran_since = now - self._ran_since, now
        self._allowance = min(MAX_PAUSE_S, self._allowance + ran * self.share / (1 - self.share))
        if self._allowance <= 0:
            return
        self._clear.wait(self._allowance)
        paused = time.monotonic() - now
        self._allowance -= paused
        self.paused_s += paused
        self._ran_since = time.monotonic()


def _wake(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)
