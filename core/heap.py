"""The cyclic garbage collector's passes, timed.

A collection holds the interpreter, so every request in flight in the process waits for it; a full
(generation 2) pass walks every tracked object. `GcPauses` times them into the API's
`groundwork_gc_pause_seconds`, which the fairness benchmark reads to tell such stalls from CPU
contention.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable


class GcPauses:
    """Times the collector's passes (the interpreter holds every thread meanwhile) into `observe`,
    from `start` to `stop`; `observe(generation, seconds)`."""

    def __init__(self, observe: Callable[[int, float], None]) -> None:
        self.observe = observe
        self._started: float | None = None

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self._started is not None:
            self.observe(info["generation"], time.perf_counter() - self._started)
            self._started = None

    def start(self) -> GcPauses:
        gc.callbacks.append(self._callback)
        return self

    def stop(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)
