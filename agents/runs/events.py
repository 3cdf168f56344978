"""The live events of agent runs, fanned out to whoever listens in this process (an SSE stream,
an agent chat completion). Past events are in the run's trace; these are only the live ones."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

SEGMENT_ENDS = ("final", "requires_action")


class RunEvents:
    def __init__(self) -> None:
        self._queues: dict[uuid.UUID, list[asyncio.Queue]] = {}

    def subscribe(self, run_id: uuid.UUID) -> asyncio.Queue:
        """Listen before the segment starts (its first event may come at its first await)."""
        queue: asyncio.Queue = asyncio.Queue()
        self._queues.setdefault(run_id, []).append(queue)
        return queue

    async def stream(self, run_id: uuid.UUID, queue: asyncio.Queue) -> AsyncIterator[dict]:
        """The run's live events up to the end of the current segment (`final` or `requires_action`)."""
        try:
            while True:
                event = await queue.get()
                yield event
                if event["type"] in SEGMENT_ENDS:
                    return
        finally:
            self._queues.get(run_id, []).remove(queue)

    def publish(self, run_id: uuid.UUID, event: dict) -> None:
        for queue in self._queues.get(run_id, []):
            queue.put_nowait(event)
