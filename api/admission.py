"""Admission of answers: how many (ask, chat) generate at once in this API process.

Beyond the limit a request gets 503 + Retry-After at once instead of a place in the engine's queue:
a queued answer waits for every answer ahead of it, so under sustained overload the latency of
admitted answers grows without bound (`python -m benchmarks.serving`: at twice capacity with no
limit, admitted asks' p99 was 12x the unloaded one).

The limit adapts to the machine (`qa.answer_latency_target`, default 2): it starts at one answer,
and every generated answer is compared with the baseline, the median time of recent answers that
ran alone. Slower than target x baseline: the limit shrinks by one. Refusals were made while this
answer ran, and one more answer at once would still fit the target (latency taken as growing in
proportion to the answers sharing the machine, the CPU's worst case): it grows by one. A GPU
server, whose batches cost little latency, so ends far higher than a 2-core CPU.
`qa.max_concurrent_answers` is a fixed ceiling on top (or the whole rule, with the target off).
"""

from __future__ import annotations

import math
import statistics
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass

from api.errors import ApiError
from api.state import AppState


@dataclass(eq=False)
class _Ticket:
    start: float
    alone: bool = True  # no other answer ran at any moment of this one
    refusals_seen: int = 0  # the slots' refusal count at admission


class AnswerSlots:
    def __init__(self, ceiling: int | None, target: float | None) -> None:
        self.ceiling, self.target = ceiling, target
        self.limit = 1 if target is not None else ceiling
        self.running: set[_Ticket] = set()
        self.refusals = 0
        self.seconds: deque[float] = deque(maxlen=32)  # recent answers' durations: the Retry-After
        self.alone: deque[float] = deque(maxlen=16)  # ...of those that ran alone: the baseline

    def retry_after(self) -> int:
        return max(1, math.ceil(statistics.fmean(self.seconds))) if self.seconds else 2

    def admit(self) -> _Ticket:
        """A ticket for one more answer; 503 when the limit is reached."""
        if self.limit is not None and len(self.running) >= self.limit:
            self.refusals += 1
            raise ApiError(
                503,
                "answers_busy",
                f"the server is generating as many answers as it takes at once now ({self.limit}); "
                "retry shortly",
                headers={"Retry-After": str(self.retry_after())},
            )
        ticket = _Ticket(time.perf_counter(), alone=not self.running, refusals_seen=self.refusals)
        for other in self.running:
            other.alone = False
        self.running.add(ticket)
        return ticket

    def release(self, ticket: _Ticket, generated: bool) -> None:
        """End of an answer; one that generated tokens feeds the limit (see the module note)."""
        self.running.discard(ticket)
        seconds = time.perf_counter() - ticket.start
        if not generated:  # the no-answer path and failures say nothing of generation's cost
            return
        self.seconds.append(seconds)
        if ticket.alone:
            self.alone.append(seconds)
        if self.target is None or not self.alone:
            return
        budget = self.target * statistics.median(self.alone)
        if seconds > budget:
            self.limit = max(1, self.limit - 1)
        elif self.refusals > ticket.refusals_seen and seconds * (self.limit + 1) / self.limit <= budget:
            self.limit += 1
        if self.ceiling is not None:
            self.limit = min(self.limit, self.ceiling)


def answer_slots(state: AppState) -> AnswerSlots | None:
    qa = state.settings.qa
    if qa.max_concurrent_answers is None and qa.answer_latency_target is None:
        return None
    return state.extras.setdefault(
        "answer_slots", AnswerSlots(qa.max_concurrent_answers, qa.answer_latency_target)
    )


async def admitted(events: AsyncIterator[dict], slots: AnswerSlots | None) -> AsyncIterator[dict]:
    """`events` if the slots take one more answer (held until it ends, streamed or not); else 503.

    NOTE: one event loop runs every handler, so the check and the admission cannot interleave.
    """
    if slots is None:
        async for event in events:
            yield event
        return
    ticket = slots.admit()
    generated = False
    try:
        async for event in events:
            if event["type"] == "done":
                generated = (event.get("usage") or {}).get("completion_tokens", 0) > 0
            yield event
    finally:
        slots.release(ticket, generated)
