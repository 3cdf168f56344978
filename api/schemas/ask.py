"""POST /v1/ask's answer (agents/qa/pipeline.py's `done` event with the `sources` it answered from)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from inference.server.schemas.common import Usage


class AskOut(BaseModel):
    model_config = ConfigDict(extra="allow")

    answer: str
    citations: list[dict[str, Any]] = Field(description="The sources the answer cites, by marker [n].")
    invalid_citations: list[Any] = Field(description="Markers that name no source.")
    usage: Usage
    timings: dict[str, float] = Field(description="Milliseconds per stage.")
    grounded: bool = Field(description="False: nothing relevant was found; the answer says so.")
    finish_reason: str | None
    answer_mode_used: str | None
    quote_method: str | None
    fallback: str | None = Field(description="Why the requested answer mode could not be used.")
    claims: list[dict[str, Any]] | None = Field(description="Each sentence's verdict against its sources.")
    query: str = Field(description="The search query (the question, rewritten in a conversation).")
    sources: list[dict[str, Any]]
    context: dict[str, Any] | None = Field(
        default=None,
        description="Tokens of the instructions, each source, history and question; the sources and "
        "history turns left out of the prompt, each with its reason.",
    )
    model: str | None = Field(
        default=None,
        description="The generator that produced the answer (qa.cascade: the model whose answer stood); "
        "null when no model ran.",
    )
    escalations: list[dict[str, Any]] = Field(
        default_factory=list,
        description="qa.cascade: `{from, reason}` for each model whose answer was weak, in order; the "
        "answer is `model`'s (reasons: truncated, refusal, unsupported_claims, incomplete_answer, "
        "low_quote_score).",
    )
    conversation_id: str | None = None
    message_id: str | None = None
