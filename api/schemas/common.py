"""The error body every 4xx/5xx carries, and how event-stream responses are documented."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class ErrorDetail(BaseModel):
    code: str
    message: str
    details: Any = None


class ErrorBody(BaseModel):
    """{"error": {"code", "message", "details"}} (api/errors.py)."""

    error: ErrorDetail


# Every route's 4xx (422 included: api/errors.py answers validation errors in this shape too).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": ErrorBody, "description": "Client error."}
}


def event_stream(description: str) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route that answers `stream: true` with server-sent events: the JSON of the
    response model stays the non-stream shape, and text/event-stream is documented beside it."""
    # NOTE: the schema of one event (what SSE clients and schemathesis parse a stream into), not of
    # the stream's bytes.
    event = {
        "type": "object",
        "description": description,
        "properties": {
            "event": {"type": "string"},
            "data": {"type": "string", "description": "The event's JSON (or [DONE] for chat)."},
            "id": {"type": "string"},
            "retry": {"type": "integer"},
        },
    }
    return {200: {"content": {"text/event-stream": {"schema": event}}}}
