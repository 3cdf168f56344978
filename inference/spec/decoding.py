"""The engine's side of speculative decoding: proposals before scheduling, verification after the pass.

Per step: `propose` returns up to k guesses for each decoding sequence, the scheduler puts them on the
sequence (`spec_token_ids`) and feeds [last token + guesses] as one chunk at its next positions, the
model runner returns one logits row per fed token, and `verify` decides the accepted guesses plus one
token of the target's own. The scheduler applies that (`Scheduler.update_from_output`): this module
reads sequences and never writes them. The K/V written for rejected guesses stay in the sequence's
blocks past `num_computed_tokens`: they are never read (attention stops at the context length) and
are overwritten by the next tokens.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from inference.protocol import FinishReason, TokenLogprob
from inference.sequence import Sequence
from inference.spec import Proposal, Proposer
from inference.spec.verify import verify_token

if TYPE_CHECKING:
    from inference.grammar import EngineGrammars

log = logging.getLogger(__name__)

MAX_PAUSE = 8  # most decode steps a request goes without proposals after verifying passes kept nothing

# (sequence, tokens it emitted earlier in this step, the next token) -> why it stops there, or None;
# the engine's stop check, which also advances the request's grammar and detokenizer.
StopCheck = Callable[[Sequence, list[int], int], FinishReason | None]


@dataclass
class Verified:
    tokens: list[int]  # the accepted guesses, then the target's own token
    logprobs: list[TokenLogprob | None]
    accepted: int  # guesses kept: their K/V count as computed, with the last token's
    finish_reason: FinishReason | None


@dataclass
class _Pace:
    """How hard to speculate for one request, adapted to what verification keeps."""

    k: int  # current proposal length, 0 = off
    misses: int = 0  # verifying passes in a row that kept no guess
    pause: int = 0  # decode steps left without proposals (back-off after misses)


class SpeculativeDecoder:
    def __init__(
        self, proposer: Proposer, num_speculative_tokens: int, max_batch: int, max_tokens: int | None = None
    ) -> None:
        self.proposer = proposer
        self.num_speculative_tokens = num_speculative_tokens
        self.max_batch = max_batch
        self.max_tokens = max_tokens
        self.num_drafts = self.num_proposed = self.num_accepted = 0
        self._pace: dict[str, _Pace] = {}

    def max_k(self, seq: Sequence) -> int:
        k = seq.params.num_speculative_tokens
        return self.num_speculative_tokens if k is None else k

    def _pace_of(self, seq: Sequence) -> _Pace:
        pace = self._pace.get(seq.request_id)
        if pace is None:
            pace = self._pace[seq.request_id] = _Pace(self.max_k(seq))
        return pace

    def forget(self, request_id: str) -> None:
        self._pace.pop(request_id, None)
        self.proposer.forget(request_id)

    def propose(self, running: list[Sequence], grammars: EngineGrammars | None) -> dict[Sequence, Proposal]:
        """The guesses of the decoding sequences, unless the batch is too large for speculation to pay
        (verifying costs 1 + k tokens of compute per sequence, and large batches are compute-bound);
        each sequence gets an equal share of the step's `max_tokens`."""
        active = len(running) <= self.max_batch
        # A sequence's share of the step's token budget, less its own last token.
        share = None if self.max_tokens is None else self.max_tokens // max(1, len(running)) - 1
        proposals: dict[Sequence, Proposal] = {}
        for seq in running:
            pace = self._pace_of(seq)
            # Room left: the last token plus k guesses may all be emitted, then one more token.
            room = min(seq.max_len - seq.num_tokens, seq.params.max_tokens - seq.num_output_tokens)
            k = min(pace.k, room - 1, pace.k if share is None else share)
            if not active or k <= 0 or seq.num_computed_tokens != seq.num_tokens - 1:
                continue
            if pace.pause:
                pace.pause -= 1
                continue
            try:
                proposal = self.proposer.propose(seq, k)
            except Exception:  # guesses are an optimisation: a failing proposer must not fail requests
                log.exception("proposer failed for %s; decoding without speculation", seq.request_id)
                self.proposer.forget(seq.request_id)
                continue
            guesses = proposal.token_ids[:k]
            grammar = grammars.get(seq.request_id) if grammars else None
            # A deterministic guess the grammar forbids would be rejected (p = 0): cut there, it cannot
            # be right. NOTE: sampled draft tokens are never cut: verification rejects a forbidden one
            # and redraws from norm(max(0, p - q)) with the unmasked q it was drawn from; cutting would
            # draw that position from p instead, which over-weights what q and p both like.
            if grammar is not None and proposal.probs is None:
                allowed = 0
                while allowed < len(guesses) and grammar.is_allowed(guesses[allowed]):
                    grammar.accept(guesses[allowed])
                    allowed += 1
                grammar.rollback(allowed)  # the engine advances the grammar by what is accepted
                del guesses[allowed:]
            if guesses:
                proposals[seq] = Proposal(guesses, proposal.probs)
        return proposals

    def verify_all(
        self,
        items: list[tuple[Sequence, int]],
        logits: torch.Tensor,
        grammars: EngineGrammars | None,
        stop: StopCheck,
    ) -> list[Verified | Exception]:
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
        results: list[Verified | Exception] = []
        for (seq, row), ok in zip(items, plain, strict=True):
            n = 1 + len(seq.spec_token_ids)
            picks = [next(best) for _ in range(n)] if ok else None
            try:
                results.append(self.verify(seq, logits[row : row + n], grammars, stop, picks))
            except Exception as e:
                results.append(e)
        return results

    def verify(
        self,
        seq: Sequence,
        logits: torch.Tensor,
        grammars: EngineGrammars | None,
        stop: StopCheck,
        picks: list[int] | None = None,
    ) -> Verified:
        """The accepted guesses of `seq` and the target's token after them, given the logits of its last
        token and of each guess (`[1 + k, vocab]`), or the target's greedy `picks` at each of those
        positions; each token goes through `stop`, and the first that stops ends the list."""
        guesses, q = seq.spec_token_ids, seq.draft_probs
        tokens: list[int] = []
        logprobs: list[TokenLogprob | None] = []
        accepted, finish = 0, None
        for i in range(len(guesses) + 1):
            guess = guesses[i] if i < len(guesses) else None
            if picks is not None:
                token, ok, logprob = picks[i], picks[i] == guess, None
            else:
                bitmask = grammars.bitmask([seq]) if grammars else None
                # Penalties count the tokens emitted so far in this step: a read-only view with them.
                view = replace(seq, token_ids=seq.token_ids + tokens) if tokens else seq
                token, ok, logprob = verify_token(
                    logits[i : i + 1], view, bitmask, guess, None if q is None or guess is None else q[i]
                )
            finish = stop(seq, tokens, token)
            tokens.append(token)
            logprobs.append(logprob)
            if not ok or finish is not None:
                break
            accepted += 1
        if finish is None:
            self._adapt(seq, accepted, len(guesses))
        self.num_drafts += 1
        self.num_proposed += len(guesses)
        self.num_accepted += accepted
        return Verified(tokens, logprobs, accepted, finish)

    def _adapt(self, seq: Sequence, accepted: int, proposed: int) -> None:
        pace = self._pace_of(seq)
        if accepted == proposed:
            pace.k = min(2 * pace.k, self.max_k(seq))
        elif 2 * accepted < proposed:
            pace.k = max(1, pace.k // 2)
        # A pass that keeps nothing cost more than a decode for one token: after 1, 2, 3... such
        # passes in a row, skip the next 1, 2, 4... (at most MAX_PAUSE) steps' proposals.
        pace.misses = pace.misses + 1 if accepted == 0 else 0
        pace.pause = min(2 ** (pace.misses - 1), MAX_PAUSE) if pace.misses else 0


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
