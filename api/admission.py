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

Fair shares between tenants (equal shares with borrowing): a tenant may use every slot while no
other tenant asks, but at the limit a tenant holding fewer than its share (the limit divided by
the tenants with answers running, itself included; at least one) is still admitted, past the
limit. So a tenant flooding asks cannot take every slot: another tenant's ask is admitted while
the flooder's next ones get 503; the slots held never exceed the tenants times their share.
Agent runs' LLM calls take a slot each under the same rule, waiting for one instead of failing
(`wait`): background runs queue behind, never beside, other tenants' answers.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections import Counter, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass

from core.errors import ClientError
from core.settings.qa import QASettings


@dataclass(eq=False)
class _Ticket:
    tenant: str
    start: float
    alone: bool = True  # no other answer ran at any moment of this one
    refusals_seen: int = 0  # the slots' refusal count at admission


class AnswerSlots:
    def __init__(self, ceiling: int | None, target: float | None) -> None:
        self.ceiling, self.target = ceiling, target
        self.limit = 1 if target is not None else ceiling
        self.running: set[_Ticket] = set()
        self.per_tenant: Counter[str] = Counter()
        self._freed: asyncio.Event | None = None  # set when a slot frees (made on the loop, lazily)
        self.refusals = 0
        self.seconds: deque[float] = deque(maxlen=32)  # recent answers' durations: the Retry-After
        self.alone: deque[float] = deque(maxlen=16)  # ...of those that ran alone: the baseline

    def retry_after(self) -> int:
        return max(1, math.ceil(statistics.fmean(self.seconds))) if self.seconds else 2

    def share(self, tenant: str) -> int:
        """Slots `tenant` may hold at the limit: the limit split among the tenants running answers."""
        tenants = {t for t, n in self.per_tenant.items() if n > 0} | {tenant}
        return max(1, (self.limit or 1) // len(tenants))

    def has_room(self, tenant: str) -> bool:
        if self.limit is None or len(self.running) < self.limit:
            return True
        return self.per_tenant[tenant] < self.share(tenant)

    def admit(self, tenant: str = "") -> _Ticket:
        """A ticket for one more answer of `tenant`; 503 when the limit is reached and the tenant
        holds its share."""
        self.check(tenant)
        return self._take(tenant)

    def check(self, tenant: str = "") -> None:
        """The 503 `admit` would answer now, before the request costs anything more (an entry point
        calls it ahead of reserving tokens: a flooding tenant's refusals then touch no storage)."""
        if not self.has_room(tenant):
            self.refusals += 1
            raise ClientError(
                503,
                "answers_busy",
                f"the server is generating as many answers as it takes at once now ({self.limit}); "
                "retry shortly",
                headers={"Retry-After": str(self.retry_after())},
            )

    def _take(self, tenant: str) -> _Ticket:
        ticket = _Ticket(tenant, time.perf_counter(), alone=not self.running, refusals_seen=self.refusals)
        for other in self.running:
            other.alone = False
        self.running.add(ticket)
        self.per_tenant[tenant] += 1
        return ticket

    async def wait(self, tenant: str) -> _Ticket:
        """A ticket once `tenant` has room (agent LLM calls: they queue rather than fail)."""
        while not self.has_room(tenant):
            if self._freed is None:
                self._freed = asyncio.Event()
            await self._freed.wait()
        return self._take(tenant)

    def release(self, ticket: _Ticket, generated: bool) -> None:
        """End of an answer; one that generated tokens feeds the limit (see the module note)."""
        if ticket in self.running:
            self.running.discard(ticket)
            self.per_tenant[ticket.tenant] -= 1
        if self._freed is not None:  # wake every waiter; those still without room wait again
            self._freed.set()
            self._freed = None
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


def build_answer_slots(qa: QASettings) -> AnswerSlots | None:
    """The process's answer slots (None without `qa.max_concurrent_answers` or a latency target)."""
    if qa.max_concurrent_answers is None and qa.answer_latency_target is None:
        return None
    return AnswerSlots(qa.max_concurrent_answers, qa.answer_latency_target)


async def admitted(
    events: AsyncIterator[dict], slots: AnswerSlots | None, tenant: str = ""
) -> AsyncIterator[dict]:
    """`events` if the slots take one more answer (held until it ends, streamed or not); else 503.

    NOTE: one event loop runs every handler, so the check and the admission cannot interleave.
    """
    if slots is None:
        async for event in events:
            yield event
        return
    ticket = slots.admit(tenant)
    generated = False
    try:
        async for event in events:
            if event["type"] == "done":
                generated = (event.get("usage") or {}).get("completion_tokens", 0) > 0
            yield event
    finally:
        slots.release(ticket, generated)
