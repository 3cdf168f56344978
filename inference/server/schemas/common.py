"""Shapes shared by the OpenAI endpoints: errors, usage, and the sampling fields of a request."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from inference.grammar import parse_structured_output
from inference.protocol import SamplingParams


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
    prompt_tokens_details: PromptTokensDetails


class StreamOptions(BaseModel):
    include_usage: bool = False


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = Field(default_factory=lambda: int(time.time()))
    owned_by: str = "groundwork"
    max_model_len: int


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class SamplingRequest(BaseModel):
    """Fields both /v1/completions and /v1/chat/completions take, including vLLM-style extra body fields.

    vLLM's structured-output fields (`structured_outputs`, `guided_json`, ...) are kept as extra
    fields: `inference.grammar.parse_structured_output` reads and validates them with the rest.
    """

    model_config = ConfigDict(extra="allow")

    model: str
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    n: int = 1
    stop: str | list[str] | None = None
    seed: int | None = None
    presence_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    frequency_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    # Not in OpenAI's API; clients send them through `extra_body`.
    top_k: int = Field(default=0, ge=0)
    min_p: float = Field(default=0.0, ge=0.0, le=1.0)
    repetition_penalty: float = Field(default=1.0, gt=0.0)
    ignore_eos: bool = False
    stop_token_ids: list[int] = Field(default_factory=list)
    response_format: dict[str, Any] | None = None

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
    def _one_choice(cls, n: int) -> int:
        if n != 1:
            raise ValueError("only n=1 is supported (one choice per request); send several requests instead")
        return n

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage

    def sampling_params(self, max_tokens: int, logprobs: int | None) -> SamplingParams:
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return SamplingParams(
            max_tokens=max_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            min_p=self.min_p,
            repetition_penalty=self.repetition_penalty,
            presence_penalty=self.presence_penalty,
            frequency_penalty=self.frequency_penalty,
            seed=self.seed,
            stop=stop,
            stop_token_ids=list(self.stop_token_ids),
            ignore_eos=self.ignore_eos,
            logprobs=logprobs,
            structured_output=parse_structured_output(
                self.model_dump(exclude={"messages", "prompt"}, exclude_none=True)
            ),
        )
