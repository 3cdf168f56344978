"""Server-sent events (framed by sse-starlette) that end with an `error` event instead of a cut
connection."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from sse_starlette import EventSourceResponse, ServerSentEvent

from api.errors import classify


def sse(event: str | None, data: Any) -> ServerSentEvent:
    """One event; `data` as JSON (a string as is: OpenAI's `[DONE]`)."""
    text = data if isinstance(data, str) else json.dumps(data, default=str)
    return ServerSentEvent(data=text, event=event, sep="\n")  # one wire format: web/static/js/api.js


async def ending_with_error_event(events: AsyncIterator[ServerSentEvent]) -> AsyncIterator[ServerSentEvent]:
    """Pass `events` through; an exception after the headers were sent becomes a final
    `event: error` with the same {"error": {code, message}} body a non-streamed request would get
    (the OpenAI SDK raises it as an APIError)."""
    try:
        async for event in events:
            yield event
    except Exception as exc:
        err = classify(exc)
        yield sse("error", {"error": {"code": err.code, "message": err.message, "status": err.status}})


def event_source(events: AsyncIterator[ServerSentEvent]) -> EventSourceResponse:
    """The response of a streamed route. sse-starlette frames the events, pings idle streams (so that
    proxies keep a long answer open) and stops the generator when the client goes away."""
    return EventSourceResponse(ending_with_error_event(events), sep="\n")
