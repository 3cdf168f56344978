"""Request and response shapes of /v1/completions (also used for its stream chunks)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from inference.server.schemas.common import SamplingRequest, Usage


class CompletionRequest(SamplingRequest):
    prompt: str | list[int]
    logprobs: int | None = Field(default=None, ge=0, le=20)


class CompletionLogprobs(BaseModel):
    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]]
    text_offset: list[int]


class CompletionChoice(BaseModel):
    index: int = 0
    text: str
    logprobs: CompletionLogprobs | None = None
    finish_reason: str | None = None


class CompletionResponse(BaseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None = None
