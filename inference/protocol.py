"""The contract between the engine and its front-ends (OpenAI server, RAG pipeline, agents).

Front-ends build a `SamplingParams` and a list of prompt token ids, call `EngineClient.generate`
and consume `RequestOutput` deltas. Nothing here depends on torch, so callers that only talk to a
remote OpenAI-compatible server can import it cheaply.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:  # the grammar package imports xgrammar; callers of this module need not
    from inference.grammar.spec import StructuredOutputSpec

FinishReason = Literal["stop", "length", "abort", "tool_calls"]


# Temperatures below this sample greedily: dividing logits by a tiny temperature overflows to inf
# (and NaN after softmax), and the distribution is a point mass at that scale anyway (as vLLM's 1e-5).
GREEDY_TEMPERATURE = 1e-5
# torch.Generator.manual_seed's range: the engine thread must never see a seed it rejects.
SEED_RANGE = (-(2**63), 2**64 - 1)


class EngineError(Exception):
    """Base class of errors the engine reports to callers."""


class InvalidRequestError(EngineError):
    """The request cannot be served as asked (maps to HTTP 400)."""


class EngineOverloadedError(EngineError):
    """The waiting queue is full (maps to HTTP 503 with Retry-After)."""

    def __init__(self, message: str, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass
class SamplingParams:
    """Per-request decoding options; `temperature` below `GREEDY_TEMPERATURE` means greedy."""

    max_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = disabled
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    logprobs: int | None = None  # number of top logprobs to return per token; None = off
    structured_output: StructuredOutputSpec | None = None  # grammar constraint (inference.grammar)
    # Tenant key of the prefix cache: requests only share cached KV blocks with requests of equal salt.
    cache_salt: str | None = None
    # Speculative tokens per step for this request: None = the engine's setting, 0 = no speculation.
    num_speculative_tokens: int | None = None

    def validate(self) -> None:
        if self.max_tokens <= 0:
            raise InvalidRequestError("max_tokens must be >= 1")
        if self.temperature < 0:
            raise InvalidRequestError("temperature must be >= 0")
        if not 0 < self.top_p <= 1:
            raise InvalidRequestError("top_p must be in (0, 1]")
        if self.top_k < 0:
            raise InvalidRequestError("top_k must be >= 0")
        if not 0 <= self.min_p <= 1:
            raise InvalidRequestError("min_p must be in [0, 1]")
        if self.repetition_penalty <= 0:
            raise InvalidRequestError("repetition_penalty must be > 0")
        if self.logprobs is not None and not 0 <= self.logprobs <= 20:
            raise InvalidRequestError("logprobs must be in [0, 20]")
        if self.num_speculative_tokens is not None and not 0 <= self.num_speculative_tokens <= 16:
            raise InvalidRequestError("num_speculative_tokens must be in [0, 16]")
        if self.seed is not None and not SEED_RANGE[0] <= self.seed <= SEED_RANGE[1]:
            raise InvalidRequestError(f"seed must be an integer in [-2^63, 2^64 - 1], got {self.seed}")

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_TEMPERATURE


@dataclass
class TokenLogprob:
    token_id: int
    logprob: float
    top: dict[int, float] = field(default_factory=dict)


@dataclass
class RequestOutput:
    """One streamed delta of a request; the last one has `finished=True`."""

    request_id: str
    new_token_ids: list[int]
    new_text: str
    finished: bool = False
    finish_reason: FinishReason | None = None
    num_prompt_tokens: int = 0
    num_output_tokens: int = 0
    num_cached_tokens: int = 0
    logprobs: list[TokenLogprob] | None = None
    scheduled_at: float | None = None  # time.time() of first scheduling (on the last delta), for traces


@dataclass
class EngineStats:
    """A snapshot of the engine's load, for metrics and health checks."""

    num_running: int
    num_waiting: int
    kv_cache_usage: float  # fraction of KV-cache blocks referenced by requests, in [0, 1]
    kv_cache_capacity_tokens: int
    num_preemptions_total: int
    num_prompt_tokens_total: int = 0
    num_generation_tokens_total: int = 0
    num_cached_tokens_total: int = 0  # prompt tokens served by the prefix cache
    prefix_cache_queries_total: int = 0  # tokens looked up in the prefix cache at admissions
    prefix_cache_hits_total: int = 0  # of those, tokens found cached
    spec_num_drafts_total: int = 0  # verification steps of sequences that had proposals
    spec_proposed_tokens_total: int = 0
    spec_accepted_tokens_total: int = 0
    max_num_seqs: int = 0  # the batch-size ceiling (queue-depth alerts compare the waiting queue to it)

    @property
    def spec_acceptance_rate(self) -> float:
        return self.spec_accepted_tokens_total / max(1, self.spec_proposed_tokens_total)

    @property
    def spec_mean_accepted_length(self) -> float:
        """Tokens emitted per verification step: accepted drafts plus the target's own token."""
        return 1 + self.spec_accepted_tokens_total / max(1, self.spec_num_drafts_total)


class EngineClient(Protocol):
    """What a front-end needs from an engine, in-process or remote."""

    model_name: str
    max_model_len: int

    def encode(self, text: str) -> list[int]: ...

    def decode(self, token_ids: list[int]) -> str: ...

    def apply_chat_template(
        self, messages: list[dict], add_generation_prompt: bool = True, tools: list[dict] | None = None
    ) -> list[int]:
        """Prompt ids of `messages`; `tools` (OpenAI function tools) are shown to the model."""
        ...

    def generate(
        self, request_id: str, prompt_token_ids: list[int], params: SamplingParams
    ) -> AsyncIterator[RequestOutput]: ...

    async def precompile(self, spec: StructuredOutputSpec) -> None:
        """Build `spec`'s grammar off the caller's event loop, before `generate` is asked for it."""
        ...

    async def abort(self, request_id: str) -> None: ...
