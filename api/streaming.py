"""Server-sent events that end with an `error` event instead of a cut connection."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from api.errors import classify


def sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


async def ending_with_error_event(chunks: AsyncIterator[str]) -> AsyncIterator[str]:
    """Pass `chunks` through; an exception after the headers were sent becomes a final
    `event: error` with the same {"error": {code, message}} body a non-streamed request would get
    (the OpenAI SDK raises it as an APIError)."""
    try:
        async for chunk in chunks:
            yield chunk
    except Exception as exc:
        err = classify(exc)
        yield sse("error", {"error": {"code": err.code, "message": err.message, "status": err.status}})
