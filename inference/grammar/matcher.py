"""Per-sequence grammar state and the batched logits mask the engine applies each step."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import xgrammar as xgr

from inference.protocol import FinishReason


class SequenceGrammar:
    """The grammar state of one sequence: what it may emit next, and whether it is done.

    Termination needs a stop token: once the grammar is complete only the tokenizer's stop ids
    are allowed, and accepting one terminates the matcher.
    """

    def __init__(self, compiled: xgr.CompiledGrammar) -> None:
        self.matcher = xgr.GrammarMatcher(compiled)
        self._probe = xgr.allocate_token_bitmask(1, compiled.tokenizer_info.vocab_size)

    def accept(self, token_id: int) -> bool:
        """Advance by one sampled token. False means the grammar forbids it (state unchanged)."""
        return self.matcher.accept_token(token_id)

    def is_allowed(self, token_id: int) -> bool:
        """Whether `token_id` may come next, without changing the state (for speculative drafts)."""
        if self.matcher.is_terminated() or not 0 <= token_id < self._probe.shape[1] * 32:
            return False
        self.matcher.fill_next_token_bitmask(self._probe)
        word = int(self._probe[0, token_id // 32])
        return bool((word >> (token_id % 32)) & 1)

    def rollback(self, num_tokens: int) -> None:
        """Undo the last `num_tokens` accepted tokens (rejected speculative tokens)."""
        self.matcher.rollback(num_tokens)

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def finish_reason(self) -> FinishReason | None:
        """Returns "stop" once the grammar accepted its stop token, None while it is unfinished.

        A sequence cut by max_tokens before that is a "length" finish and its output may be
        incomplete (e.g. unbalanced JSON).
        """
        return "stop" if self.matcher.is_terminated() else None


class GrammarBitmask:
    """The token bitmask of a batch: one packed int32 row per sequence (bit set = token allowed).

    One instance per engine; it reuses its buffer across steps. Rows of unconstrained sequences
    (None) allow everything; a terminated grammar allows only its stop tokens. Ids beyond the
    tokenizer's vocabulary (lm_head padding) are never allowed in constrained rows.
    """

    def __init__(self, vocab_size: int, max_threads: int = 1) -> None:
        self.vocab_size = vocab_size
        self._batch = xgr.BatchGrammarMatcher(max_threads)
        self._bitmask = xgr.allocate_token_bitmask(0, vocab_size)

    def fill(self, grammars: Sequence[SequenceGrammar | None]) -> torch.Tensor | None:
        """The bitmask `[len(grammars), ceil(vocab / 32)]` (a view of the reused buffer, on CPU),
        or None when no row is constrained."""
        if all(g is None for g in grammars):
            return None
        if self._bitmask.shape[0] < len(grammars):
            self._bitmask = xgr.allocate_token_bitmask(len(grammars), self.vocab_size)
        bitmask = self._bitmask[: len(grammars)]
        xgr.reset_token_bitmask(bitmask)
        live = [i for i, g in enumerate(grammars) if g is not None and not g.is_terminated()]
        if live:
            self._batch.batch_fill_next_token_bitmask(
                [grammars[i].matcher for i in live], bitmask, indices=live
            )
        for i, grammar in enumerate(grammars):
            if grammar is not None and grammar.is_terminated():
                bitmask[i] = 0
                for stop in grammar.matcher.stop_token_ids:
                    bitmask[i, stop // 32] |= _bit(stop % 32)
        return bitmask

    def apply(self, logits: torch.Tensor, grammars: Sequence[SequenceGrammar | None]) -> None:
        """Fill the bitmask and set disallowed `logits` ([batch, vocab], float) to -inf in place."""
        if len(grammars) != logits.shape[0]:
            raise ValueError(f"{len(grammars)} grammars for {logits.shape[0]} logits rows")
        bitmask = self.fill(grammars)
        if bitmask is None:
            return
        rows = [i for i, g in enumerate(grammars) if g is not None]
        width = min(logits.shape[-1], self.vocab_size)
        backend = "cpu" if logits.device.type == "cpu" else "torch_native"  # NOTE: no triton here
        xgr.apply_token_bitmask_inplace(
            logits, bitmask.to(logits.device), vocab_size=width, indices=rows, backend=backend
        )
        if logits.shape[-1] > self.vocab_size:
            logits[rows, self.vocab_size :] = float("-inf")


def _bit(position: int) -> int:
    """Bit `position` of an int32 word, as the signed value torch stores."""
    return -(2**31) if position == 31 else 1 << position
