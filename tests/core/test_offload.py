"""core.offload.off_loop: work in a worker thread, and a cancel raised only once that work is over
(the session the thread uses must not be closed under it)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from core.offload import off_loop


def test_the_work_runs_in_a_worker_thread_with_its_result_and_errors():
    def where(x: int) -> tuple[int, bool]:
        return x + 1, threading.current_thread() is threading.main_thread()

    async def scenario() -> None:
        assert await off_loop(where, 1) == (2, False)
        with pytest.raises(ZeroDivisionError):
            await off_loop(lambda: 1 / 0)

    asyncio.run(scenario())


def test_a_cancel_is_raised_only_after_the_thread_returned():
    finished: list[float] = []

    def slow() -> str:
        time.sleep(0.5)
        finished.append(time.monotonic())
        return "dropped"

    async def scenario() -> float:
        task = asyncio.create_task(off_loop(slow))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic()

    raised_at = asyncio.run(scenario())
    # With asyncio.to_thread the cancel is raised at once, the thread still running (finished empty).
    assert finished and finished[0] <= raised_at


def test_a_timeout_around_it_still_times_out():
    async def scenario() -> None:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await off_loop(time.sleep, 0.3)

    asyncio.run(scenario())
