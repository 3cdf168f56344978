"""The platform's /v1/chat/completions shapes: the engine server's OpenAI shapes
(inference/server/schemas/chat.py), plus the grounded answer's extras of `rag/` models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, model_serializer

from inference.server.schemas.chat import ChatCompletionChunk, ChatCompletionResponse


class RagFields(BaseModel):
    """Only `rag/<collection>` models set these (and `agent/<kind>` models the last two); left out
    of the body where they are not set."""

    citations: list[dict[str, Any]] | None = None
    answer_mode_used: str | None = None
    quote_method: str | None = None
    fallback: str | None = None
    claims: list[dict[str, Any]] | None = None
    answered_by: str | None = None  # the generator whose answer stood (qa.cascade: the last tried)
    escalations: list[dict[str, Any]] | None = None  # qa.cascade: {from, reason} per weak answer

    # NOTE: no return annotation, so that the documented schema stays the model's own.
    @model_serializer(mode="wrap")
    def _without_absent_extras(self, handler):
        return {k: v for k, v in handler(self).items() if v is not None or k not in RagFields.model_fields}


class PlatformChatCompletion(RagFields, ChatCompletionResponse):
    pass


class PlatformChatChunk(RagFields, ChatCompletionChunk):
    pass
