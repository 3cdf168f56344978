"""The engine's side of speculative decoding: proposals before scheduling, verification after the pass.

Per step: `propose` gives each decoding sequence up to `spec_k` guesses (`seq.spec_token_ids`), the
scheduler feeds [last token + guesses] as one chunk at the sequence's next positions, the model runner
returns one logits row per fed token, and `verify` emits the accepted guesses plus one token of the
target's own. The K/V written for rejected guesses stay in the sequence's blocks past
`num_computed_tokens`: they are never read (attention stops at the context length) and are
overwritten by the next tokens.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from inference.protocol import TokenLogprob
from inference.sequence import Sequence
from inference.spec import Proposer
from inference.spec.verify import verify_token

if TYPE_CHECKING:
    from inference.grammar import EngineGrammars

log = logging.getLogger(__name__)

MAX_PAUSE = 8  # most decode steps a request goes without proposals after verifying passes kept nothing


class SpeculativeDecoder:
    def __init__(
        self, proposer: Proposer, num_speculative_tokens: int, max_batch: int, max_tokens: int | None = None
    ) -> None:
        self.proposer = proposer
        self.num_speculative_tokens = num_speculative_tokens
        self.max_batch = max_batch
        self.max_tokens = max_tokens
        self.num_drafts = self.num_proposed = self.num_accepted = 0

    def max_k(self, seq: Sequence) -> int:
        k = seq.params.num_speculative_tokens
        return self.num_speculative_tokens if k is None else k

    def propose(self, running: list[Sequence], grammars: EngineGrammars | None) -> None:
        """Set the guesses of the decoding sequences, unless the batch is too large for speculation to
        pay (verifying costs 1 + k tokens of compute per sequence, and large batches are compute-bound);
        each sequence gets an equal share of the step's `max_tokens`."""
        active = len(running) <= self.max_batch
        # A sequence's share of the step's token budget, less its own last token.
        share = None if self.max_tokens is None else self.max_tokens // max(1, len(running)) - 1
        for seq in running:
            seq.spec_token_ids = []
            seq.draft_probs = None
            # Room left: the last token plus k guesses may all be emitted, then one more token.
            room = min(seq.max_len - seq.num_tokens, seq.params.max_tokens - seq.num_output_tokens)
            k = min(seq.spec_k, room - 1, seq.spec_k if share is None else share)
            if not active or k <= 0 or seq.num_computed_tokens != seq.num_tokens - 1:
                continue
            if seq.spec_pause:
                seq.spec_pause -= 1
                continue
            try:
                guesses = self.proposer.propose(seq, k)[:k]
            except Exception:  # guesses are an optimisation: a failing proposer must not fail requests
                log.exception("proposer failed for %s; decoding without speculation", seq.request_id)
                self.proposer.forget(seq.request_id)
                continue
            grammar = grammars.get(seq.request_id) if grammars else None
            # A deterministic guess the grammar forbids would be rejected (p = 0): cut there, it cannot
            # be right. NOTE: sampled draft tokens are never cut: verification rejects a forbidden one
            # and redraws from norm(max(0, p - q)) with the unmasked q it was drawn from; cutting would
            # draw that position from p instead, which over-weights what q and p both like.
            if grammar is not None and seq.draft_probs is None:
                allowed = 0
                while allowed < len(guesses) and grammar.is_allowed(guesses[allowed]):
                    grammar.accept(guesses[allowed])
                    allowed += 1
                grammar.rollback(allowed)  # the engine advances the grammar by what is accepted
                del guesses[allowed:]
            seq.spec_token_ids = guesses

    def verify_all(
        self,
        items: list[tuple[Sequence, int]],
        logits: torch.Tensor,
        grammars: EngineGrammars | None,
        append: Callable[[Sequence, int], None],
    ) -> list[tuple[list[int], list[TokenLogprob | None]] | Exception]:
        """`verify` each (sequence, its first logits row). The rows of plain greedy sequences (no
        grammar, penalties or logprobs: their token is the raw argmax) are decided in one batched
        argmax and one host sync, instead of one per position. A sequence whose verification raises
        gets the exception in its place, so that it fails alone."""
        plain = [_plain_greedy(seq) for seq, _ in items]
        rows = [
            row + i
            for (seq, row), ok in zip(items, plain, strict=True)
            if ok
            for i in range(1 + len(seq.spec_token_ids))
        ]
        best = iter(logits[torch.tensor(rows, device=logits.device)].argmax(dim=-1).tolist() if rows else [])
        results: list[tuple[list[int], list[TokenLogprob | None]] | Exception] = []
        for (seq, row), ok in zip(items, plain, strict=True):
            n = 1 + len(seq.spec_token_ids)
            picks = [next(best) for _ in range(n)] if ok else None
            try:
                results.append(self.verify(seq, logits[row : row + n], grammars, append, picks))
            except Exception as e:
                results.append(e)
        return results

    def verify(
        self,
        seq: Sequence,
        logits: torch.Tensor,
        grammars: EngineGrammars | None,
        append: Callable[[Sequence, int], None],
        picks: list[int] | None = None,
    ) -> tuple[list[int], list[TokenLogprob | None]]:
        """Emit (with `append`) the accepted guesses of `seq` and the target's token after them, given the
        logits of its last token and of each guess (`[1 + k, vocab]`), or the target's greedy `picks` at
        each of those positions; returns the tokens and logprobs."""
        guesses, q = seq.spec_token_ids, seq.draft_probs
        seq.spec_token_ids, seq.draft_probs = [], None
        seq.num_computed_tokens += 1  # the last token; each accepted guess is computed as well
        tokens, logprobs = [], []
        accepted = 0
        for i in range(len(guesses) + 1):
            guess = guesses[i] if i < len(guesses) else None
            if picks is not None:
                token, ok, logprob = picks[i], picks[i] == guess, None
            else:
                bitmask = grammars.bitmask([seq]) if grammars else None
                token, ok, logprob = verify_token(
                    logits[i : i + 1], seq, bitmask, guess, None if q is None or guess is None else q[i]
                )
            append(seq, token)
            tokens.append(token)
            logprobs.append(logprob)
            if not ok or seq.finish_reason is not None:
                break
            accepted += 1
            seq.num_computed_tokens += 1
        if seq.finish_reason is None:
            if accepted == len(guesses):
                seq.spec_k = min(2 * seq.spec_k, self.max_k(seq))
            elif 2 * accepted < len(guesses):
                seq.spec_k = max(1, seq.spec_k // 2)
            # A pass that keeps nothing cost more than a decode for one token: after 1, 2, 3... such
            # passes in a row, skip the next 1, 2, 4... (at most MAX_PAUSE) steps' proposals.
            seq.spec_misses = seq.spec_misses + 1 if accepted == 0 else 0
            seq.spec_pause = min(2 ** (seq.spec_misses - 1), MAX_PAUSE) if seq.spec_misses else 0
        self.num_drafts += 1
        self.num_proposed += len(guesses)
        self.num_accepted += accepted
        return tokens, logprobs


def _plain_greedy(seq: Sequence) -> bool:
    p = seq.params
    return (
        p.greedy
        and p.structured_output is None
        and p.logprobs is None
        and p.repetition_penalty == 1
        and not p.presence_penalty
        and not p.frequency_penalty
    )
