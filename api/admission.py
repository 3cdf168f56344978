"""Admission of answers: at most `qa.max_concurrent_answers` generating at once in this API process.

Beyond it a request gets 503 + Retry-After at once instead of a place in the engine's queue: a queued
answer waits for every answer ahead of it, so under sustained overload the latency of admitted
answers grows without bound (`python -m benchmarks.serving`: at twice capacity with no cap, admitted
asks' p99 was 12x the unloaded one). Off by default; set it to what the machine sustains.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import deque
from collections.abc import AsyncIterator

from api.errors import ApiError
from api.state import AppState


class AnswerSlots:
    def __init__(self, limit: int) -> None:
        self.limit, self.busy = limit, 0
        self.seconds: deque[float] = deque(maxlen=32)  # recent answers' durations: the Retry-After

    def retry_after(self) -> int:
        return max(1, math.ceil(statistics.fmean(self.seconds))) if self.seconds else 2


def answer_slots(state: AppState) -> AnswerSlots | None:
    limit = state.settings.qa.max_concurrent_answers
    if limit is None:
        return None
    return state.extras.setdefault("answer_slots", AnswerSlots(limit))


async def admitted(events: AsyncIterator[dict], slots: AnswerSlots | None) -> AsyncIterator[dict]:
    """`events` if a slot is free (held until the answer ends, streamed or not); else 503.

    NOTE: one event loop runs every handler, so the check and the increment cannot interleave.
    """
    if slots is not None and slots.busy >= slots.limit:
        raise ApiError(
            503,
            "answers_busy",
            f"{slots.limit} answers are being generated, the most this server takes at once; retry shortly",
            headers={"Retry-After": str(slots.retry_after())},
        )
    if slots is None:
        async for event in events:
            yield event
        return
    slots.busy += 1
    start = time.perf_counter()
    try:
        async for event in events:
            yield event
    finally:
        slots.busy -= 1
        slots.seconds.append(time.perf_counter() - start)
