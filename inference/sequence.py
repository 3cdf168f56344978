"""One request's state as it moves through the engine."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import torch

from inference.protocol import FinishReason, SamplingParams


class SeqStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)
class Sequence:
    """Tokens, KV-cache blocks and progress of one request.

    NOTE: `token_ids` is prompt + output. `num_computed_tokens` counts tokens whose K/V are in the
    cache; the scheduler feeds `token_ids[num_computed_tokens:]` (in chunks) until it reaches the end,
    and only then is a new token sampled. Preemption resets it to 0, so recomputation covers the output
    produced so far as well as the prompt. The scheduler is the one writer of this state (status,
    tokens, progress, blocks, guesses, finish reason); everything else reads it.
    """

    request_id: str
    token_ids: list[int]
    num_prompt_tokens: int
    params: SamplingParams
    max_len: int  # prompt + output never exceed this (context clamp)
    status: SeqStatus = SeqStatus.WAITING
    num_computed_tokens: int = 0
    num_cached_tokens: int | None = None  # prompt tokens the prefix cache served at first admission
    scheduled_at: float | None = None  # time.time() at first admission (its queue wait ends there)
    block_table: list[int] = field(default_factory=list)
    block_hashes: list[bytes] = field(default_factory=list)  # hashes of the full blocks, in order
    generator: torch.Generator | None = None
    finish_reason: FinishReason | None = None
    # Speculative decoding (inference/spec/). NOTE: `spec_token_ids` are the guesses the scheduler put
    # on the sequence for the positions after `token_ids` this step (with their draft distributions,
    # or None for point-mass guesses), cleared when it applies the step's outcome; they are never part
    # of `token_ids`, so they are never hashed into the prefix cache.
    spec_token_ids: list[int] = field(default_factory=list)
    draft_probs: torch.Tensor | None = None  # [len(spec_token_ids), vocab]

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens :]

    @property
    def is_finished(self) -> bool:
        return self.status is SeqStatus.FINISHED
