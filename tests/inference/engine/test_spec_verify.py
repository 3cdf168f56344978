"""Rejection sampling keeps the target's distribution; prompt lookup finds the continuation."""

from __future__ import annotations

import pytest
import torch

from inference.protocol import SamplingParams
from inference.sequence import Sequence
from inference.spec import Proposal
from inference.spec.prompt_lookup import PromptLookupProposer
from inference.spec.verify import accept_or_resample

P = torch.tensor([0.05, 0.4, 0.25, 0.2, 0.1])
Q = torch.tensor([0.3, 0.1, 0.3, 0.05, 0.25])
SAMPLES = 20_000


def _histogram(tokens: list[int]) -> torch.Tensor:
    return torch.bincount(torch.tensor(tokens), minlength=len(P)).float() / len(tokens)


@pytest.mark.unit
def test_rejection_sampling_with_a_draft_distribution_yields_the_target():
    gen = torch.Generator().manual_seed(0)
    guesses = torch.multinomial(Q, SAMPLES, replacement=True, generator=gen).tolist()
    results = [accept_or_resample(P, Q, g, gen) for g in guesses]
    assert (_histogram([t for t, _ in results]) - P).abs().max() < 0.02
    # Acceptance is sum(min(p, q)) = 0.05 + 0.1 + 0.25 + 0.05 + 0.1.
    assert abs(sum(ok for _, ok in results) / SAMPLES - 0.55) < 0.02


@pytest.mark.unit
@pytest.mark.parametrize("guess", [1, 4])
def test_rejection_sampling_of_a_point_mass_guess_yields_the_target(guess):
    gen = torch.Generator().manual_seed(1)
    results = [accept_or_resample(P, None, guess, gen) for _ in range(SAMPLES)]
    assert (_histogram([t for t, _ in results]) - P).abs().max() < 0.02
    assert all(ok == (t == guess) for t, ok in results)


def _seq(tokens: list[int]) -> Sequence:
    return Sequence("r", tokens, len(tokens), SamplingParams(), 100)


@pytest.mark.unit
def test_prompt_lookup_continues_the_latest_match_of_the_longest_ngram():
    lookup = PromptLookupProposer(max_ngram=3, min_ngram=1)
    assert lookup.propose(_seq([7, 1, 2, 3, 9, 1, 2, 3, 4, 5, 6, 0, 2, 3]), 3).token_ids == [4, 5, 6]
    assert lookup.propose(_seq([5, 8, 5]), 4).token_ids == [8, 5]
    assert lookup.propose(_seq([1, 2, 3, 4]), 4).token_ids == []
    assert PromptLookupProposer(min_ngram=2).propose(_seq([1, 2, 9, 2]), 4).token_ids == []


class _ForbidZero:
    """A grammar (the engine's `EngineGrammars` and matcher in one) that never allows token 0."""

    def get(self, request_id: str) -> _ForbidZero:
        return self

    def is_allowed(self, token: int) -> bool:
        return token != 0

    def accept(self, token: int) -> None:
        pass

    def rollback(self, n: int) -> None:
        pass

    def bitmask(self, seqs: list[Sequence]) -> torch.Tensor:
        mask = torch.ones(len(seqs), len(P), dtype=torch.bool)
        mask[:, 0] = False
        return mask


class _SampledDraft:
    """A draft model in miniature: guesses drawn from Q, which the grammar does not mask."""

    def __init__(self, generator: torch.Generator) -> None:
        self.generator = generator

    def propose(self, seq: Sequence, k: int) -> Proposal:
        guesses = torch.multinomial(Q, k, replacement=True, generator=self.generator).tolist()
        return Proposal(guesses, Q.repeat(k, 1))

    def forget(self, request_id: str) -> None:
        pass


@pytest.mark.unit
def test_sampled_drafts_under_a_grammar_yield_the_masked_target():
    """A sampled draft token the grammar forbids must go to verification (rejected, redrawn from the
    residual); cutting the guesses there drew that position from p and biased the output."""
    from inference.spec.decoding import SpeculativeDecoder

    gen = torch.Generator().manual_seed(5)
    decoder = SpeculativeDecoder(_SampledDraft(gen), num_speculative_tokens=2, max_batch=4)
    grammar = _ForbidZero()
    logits = P.log().repeat(3, 1)
    firsts = []
    for _ in range(6000):
        seq = Sequence("r", [1], 1, SamplingParams(temperature=1.0), 100)
        seq.generator = gen
        (proposal,) = decoder.propose([seq], grammar).values()
        assert len(proposal.token_ids) == 2  # never cut
        seq.spec_token_ids, seq.draft_probs = proposal.token_ids, proposal.probs  # as the scheduler does
        firsts.append(decoder.verify(seq, logits.clone(), grammar, lambda s, emitted, t: None).tokens[0])
        decoder.forget(seq.request_id)  # each draw a fresh request: no back-off carried over
    masked = P.clone()
    masked[0] = 0
    assert (_histogram(firsts) - masked / masked.sum()).abs().max() < 0.02
