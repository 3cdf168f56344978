"""Request and response shapes of /v1/completions (also used for its stream chunks)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from inference.server.schemas.common import SamplingRequest, Usage


class CompletionRequest(SamplingRequest):
    prompt: str | list[int]
    logprobs: int | None = Field(default=None, ge=0, le=20)

    @field_validator("prompt", mode="before")
    @classmethod
    def _prompt_shape(cls, prompt: object) -> object:
        # Checked up front: pydantic would report one error per union member ("prompt.str", ...).
        if isinstance(prompt, str):
            return prompt
        if isinstance(prompt, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            return prompt
        raise ValueError("prompt must be a string or a list of token ids (batches of prompts are not served)")


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
