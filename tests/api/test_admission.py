"""Adaptive admission of answers (api/admission.py), on a fake clock: the limit grows while answers
stay under the latency target and refusals show demand, and shrinks when answers exceed it."""

from __future__ import annotations

import pytest

from api import admission
from api.admission import AnswerSlots
from core.errors import ClientError


@pytest.fixture
def clock(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(admission.time, "perf_counter", lambda: now[0])
    return now


def _refused(slots: AnswerSlots) -> ClientError:
    with pytest.raises(ClientError) as refused:
        slots.admit()
    return refused.value


def test_the_limit_grows_under_demand_while_answers_are_fast_and_shrinks_when_slow(clock):
    slots = AnswerSlots(ceiling=None, target=2.0)
    first = slots.admit()
    assert _refused(slots).status == 503  # one answer at a time until there is a baseline
    clock[0] += 1.0
    slots.release(first, generated=True)  # ran alone in 1 s: the baseline; 2 at once fit 2 s
    assert slots.limit == 2
    a, b = slots.admit(), slots.admit()
    refused = _refused(slots)
    assert refused.headers["Retry-After"] == "1" and "at once now (2)" in refused.message
    clock[0] += 1.8  # 1.8 s each, sharing the machine: within 2 x 1 s, but 3 at once would not be
    slots.release(a, generated=True)
    slots.release(b, generated=True)
    assert slots.limit == 2
    c, d = slots.admit(), slots.admit()
    clock[0] += 2.5  # over 2 x the baseline: one fewer at once
    slots.release(c, generated=True)
    assert slots.limit == 1
    slots.release(d, generated=True)
    assert slots.limit == 1 and list(slots.alone) == [1.0]  # overlapped answers are not the baseline


def test_the_limit_does_not_grow_without_refusals_nor_past_the_ceiling(clock):
    slots = AnswerSlots(ceiling=2, target=2.0)
    for _ in range(3):
        ticket = slots.admit()
        clock[0] += 1.0
        slots.release(ticket, generated=True)
    assert slots.limit == 1  # nobody was turned away: no reason to take more at once
    for _ in range(3):
        tickets = [slots.admit() for _ in range(slots.limit)]
        _refused(slots)
        clock[0] += 0.5
        for ticket in tickets:
            slots.release(ticket, generated=True)
    assert slots.limit == 2  # fast enough for more, but the ceiling


def test_answers_that_generated_nothing_do_not_move_the_limit(clock):
    slots = AnswerSlots(ceiling=None, target=2.0)
    ticket = slots.admit()
    _refused(slots)
    clock[0] += 0.01
    slots.release(ticket, generated=False)  # the no-answer path: no baseline from it
    assert slots.limit == 1 and not slots.alone and not slots.seconds


def test_without_a_target_the_ceiling_is_a_fixed_limit(clock):
    slots = AnswerSlots(ceiling=3, target=None)
    tickets = [slots.admit() for _ in range(3)]
    _refused(slots)
    clock[0] += 100.0
    for t in tickets:
        slots.release(t, generated=True)
    assert slots.limit == 3


def test_a_flooding_tenant_cannot_take_every_slot(clock):
    slots = AnswerSlots(ceiling=4, target=None)
    flood = [slots.admit("d") for _ in range(4)]  # alone, tenant d borrows every slot
    with pytest.raises(ClientError):
        slots.admit("d")
    b = slots.admit("b")  # under its share (4 // 2): admitted past the limit
    slots.admit("b")
    with pytest.raises(ClientError):
        slots.admit("b")  # at its share now
    with pytest.raises(ClientError):
        slots.admit("d")
    slots.release(b, generated=True)
    for ticket in flood[:3]:
        slots.release(ticket, generated=True)
    assert slots.admit("d") and slots.admit("d")  # d below the limit again: borrows


def test_agent_calls_wait_for_a_slot_and_leave_another_tenants_share_alone(clock):
    import asyncio

    async def scenario() -> list[str]:
        slots = AnswerSlots(ceiling=1, target=None)
        held = slots.admit("d")
        order: list[str] = []

        async def agent_call() -> None:
            ticket = await slots.wait("d")
            order.append("agent")
            slots.release(ticket, generated=False)

        waiting = asyncio.create_task(agent_call())
        await asyncio.sleep(0.01)
        assert not order  # d holds its share: the call waits, no 503
        order.append("ask b")
        slots.release(slots.admit("b"), generated=True)  # another tenant is still admitted
        slots.release(held, generated=True)
        await asyncio.wait_for(waiting, 5)
        return order

    assert asyncio.run(scenario()) == ["ask b", "agent"]
