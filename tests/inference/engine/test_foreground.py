"""The engine steps aside for interactive work (inference/foreground.py): it waits while a hold is
taken, for a bounded share of its time, and a request waiting on it holds nothing."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from inference.async_engine import AsyncLLMEngine
from inference.config import EngineConfig
from inference.foreground import MAX_PAUSE_S, Foreground, release_current
from inference.protocol import SamplingParams

GREEDY = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)


@pytest.mark.unit
def test_wait_returns_at_once_unless_held_and_ends_with_the_hold():
    gate = Foreground(0.5)
    gate.wait()
    assert gate.paused_s == 0
    with gate.holding():
        threading.Timer(0.05, release_current).start()  # another context: releases nothing
        start = time.monotonic()
        gate.wait()
        assert time.monotonic() - start >= MAX_PAUSE_S * 0.9  # held for the whole allowance
    gate = Foreground(0.5)  # a full allowance again
    hold = gate.take()
    threading.Timer(0.05, hold.release).start()
    start = time.monotonic()
    gate.wait()
    assert 0.04 <= time.monotonic() - start < MAX_PAUSE_S * 0.9
    hold.release()  # a second release changes nothing
    gate.wait()
    assert gate._clear.is_set()


@pytest.mark.unit
def test_the_pause_allowance_is_a_share_of_the_engines_time():
    gate = Foreground(0.5)
    hold = gate.take()
    gate.wait()  # spends the allowance (it starts full)
    start = time.monotonic()
    gate.wait()  # no time ran since: nothing left to pause
    assert time.monotonic() - start < 0.02
    time.sleep(0.1)  # the engine runs 0.1 s: at share 0.5 it may then pause as long
    start = time.monotonic()
    gate.wait()
    assert 0.08 <= time.monotonic() - start < 0.15
    hold.release()
    never = Foreground(0.0)
    never.take()
    never.wait()
    assert never.paused_s == 0


@pytest.mark.unit
def test_release_current_ends_only_the_current_requests_hold():
    gate = Foreground(0.5)
    other = gate.take()
    with gate.holding():
        release_current()
        assert not gate._clear.is_set()  # the other request's hold stands
        other.release()
        assert gate._clear.is_set()


@pytest.mark.unit
def test_yield_to_holds_waits_for_the_last_hold_at_most_the_longest_pause():
    async def scenario() -> None:
        gate = Foreground(0.5)
        start = time.monotonic()
        await gate.yield_to_holds()  # nothing held
        assert time.monotonic() - start < 0.01
        first, second = gate.take(), gate.take()
        loop = asyncio.get_running_loop()
        loop.call_later(0.03, first.release)
        threading.Timer(0.08, second.release).start()  # a hold may end on another thread
        start = time.monotonic()
        await asyncio.gather(gate.yield_to_holds(), gate.yield_to_holds())
        assert 0.07 <= time.monotonic() - start < MAX_PAUSE_S * 0.9
        stuck = gate.take()
        start = time.monotonic()
        await gate.yield_to_holds()  # a hold that never ends: the waiter gives up and leaves
        assert MAX_PAUSE_S * 0.9 <= time.monotonic() - start < MAX_PAUSE_S * 2
        assert gate._waiters == []
        stuck.release()

    asyncio.run(scenario())


def _generate(engine: AsyncLLMEngine, gate: Foreground | None = None) -> list[int]:
    async def run() -> list[int]:
        return [t async for out in engine.generate("r", [1, 2, 3, 4], GREEDY) for t in out.new_token_ids]

    if gate is None:
        return asyncio.run(run())
    with gate.holding():  # the caller's own hold: ends as its request is queued
        return asyncio.run(run())


@pytest.mark.unit
def test_the_engine_pauses_for_another_requests_hold_not_for_its_callers(tiny_llama):
    gate = Foreground(0.5)
    engine = AsyncLLMEngine(EngineConfig(tiny_llama, device="cpu", kv_cache_memory_gb=0.01), "tiny", gate)
    engine.start()
    try:
        alone = _generate(engine)
        assert _generate(engine, gate) == alone and gate.paused_s == 0
        other = gate.take()  # another request retrieving meanwhile
        threading.Timer(0.2, other.release).start()
        start = time.monotonic()
        assert _generate(engine) == alone  # pausing changes no output
        assert time.monotonic() - start >= 0.15 and gate.paused_s >= 0.15
    finally:
        engine.shutdown()
