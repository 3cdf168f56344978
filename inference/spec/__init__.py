"""Speculative decoding: cheap proposals for the next tokens, verified by the target in one pass.

A `Proposer` guesses up to k tokens that follow a running sequence; the engine feeds the last token
plus the guesses as one chunk, and `verify.verify_token` accepts them one position at a time so the
output distribution stays the target's (greedy: exactly its argmax). See inference/README.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch

from inference.sequence import Sequence

if TYPE_CHECKING:
    from inference.config import EngineConfig


@dataclass
class Proposal:
    """Guesses for the tokens after a sequence; the scheduler puts them on it for one step."""

    token_ids: list[int]
    probs: torch.Tensor | None = None  # [len(token_ids), vocab] when drawn from a distribution q;
    # None for point-mass guesses (prompt lookup, greedy drafts)


class Proposer(Protocol):
    def propose(self, seq: Sequence, k: int) -> Proposal:
        """Up to `k` tokens likely to follow `seq.token_ids` (may be fewer, or none); reads `seq`,
        never writes it."""
        ...

    def forget(self, request_id: str) -> None:
        """The request left the engine: drop whatever state the proposer keeps for it."""
        ...


def build_proposer(
    config: EngineConfig, vocab_size: int, max_model_len: int, num_blocks: int
) -> Proposer | None:
    """The proposer of `config.speculative`; a draft model's KV pool holds at most as many blocks as the
    target's (`num_blocks`)."""
    if config.speculative == "prompt_lookup":
        from inference.spec.prompt_lookup import PromptLookupProposer

        return PromptLookupProposer(config.prompt_lookup_max, config.prompt_lookup_min)
    if config.speculative == "draft":
        from inference.spec.draft import DraftModelProposer

        return DraftModelProposer(config, vocab_size, max_model_len, num_blocks)
    return None
