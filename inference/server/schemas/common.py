"""Shapes shared by the OpenAI endpoints: errors, usage, and the sampling fields of a request."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from inference.grammar import parse_structured_output
from inference.grammar.spec import ToolFormat
from inference.protocol import SEED_RANGE, SamplingParams


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


class PromptTokensDetails(BaseModel):
    cached_tokens: int = 0


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    # Defaulted for callers whose backends report no cache use (the platform's agent/ models).
    prompt_tokens_details: PromptTokensDetails = Field(default_factory=PromptTokensDetails)


class StreamOptions(BaseModel):
    include_usage: bool | None = False


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = Field(default_factory=lambda: int(time.time()))
    owned_by: str = "groundwork"
    max_model_len: int


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


# Request fields that map one to one onto SamplingParams (defaults: SamplingParams's, as OpenAI's).
_SAMPLING_FIELDS = {
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "stop",
    "stop_token_ids",
    "ignore_eos",
    "cache_salt",
    "num_speculative_tokens",
}


class SamplingRequest(BaseModel):
    """Fields both /v1/completions and /v1/chat/completions take, including vLLM-style extra body fields.

    vLLM's structured-output fields (`structured_outputs`, `guided_json`, ...) are kept as extra
    fields: `inference.grammar.parse_structured_output` reads and validates them with the rest.
    """

    model_config = ConfigDict(extra="allow")

    # NOTE: OpenAI's API takes null for any optional field (some clients send it): None means the
    # default, resolved in `sampling_params`.
    model: str
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    n: int | None = None
    stop: str | list[str] | None = None
    seed: int | None = Field(default=None, ge=SEED_RANGE[0], le=SEED_RANGE[1])
    presence_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(default=None, ge=-2.0, le=2.0)
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    response_format: dict[str, Any] | None = None
    # Not in OpenAI's API; clients send them through `extra_body`.
    top_k: int | None = Field(default=None, ge=0)
    min_p: float | None = Field(default=None, ge=0.0, le=1.0)
    repetition_penalty: float | None = Field(default=None, gt=0.0)
    ignore_eos: bool | None = None
    stop_token_ids: list[int] | None = None
    cache_salt: str | None = None  # requests share prefix-cache blocks only with equal salts
    num_speculative_tokens: int | None = Field(default=None, ge=0)

    @field_validator("stop", mode="before")
    @classmethod
    def _stop_shape(cls, stop: object) -> object:
        # Checked up front: pydantic would report one error per union member ("stop.str", ...).
        if stop is None or isinstance(stop, str):
            return stop
        if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
            return stop
        raise ValueError("stop must be a string or a list of strings")

    @field_validator("n")
    @classmethod
    def _one_choice(cls, n: int | None) -> int | None:
        if n not in (None, 1):
            raise ValueError("only n=1 is supported (one choice per request); send several requests instead")
        return n

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and bool(self.stream_options.include_usage)

    def sampling_params(
        self, max_tokens: int, logprobs: int | None, tool_format: ToolFormat = "json"
    ) -> SamplingParams:
        given = self.model_dump(include=_SAMPLING_FIELDS, exclude_none=True)
        if isinstance(self.stop, str):
            given["stop"] = [self.stop]
        return SamplingParams(
            max_tokens=max_tokens,
            logprobs=logprobs,
            **given,
            structured_output=parse_structured_output(
                self.model_dump(exclude={"messages", "prompt"}, exclude_none=True), tool_format
            ),
        )
