"""Rejection sampling keeps the target's distribution; prompt lookup finds the continuation."""

from __future__ import annotations

import pytest
import torch

from inference.protocol import SamplingParams
from inference.sequence import Sequence
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
    assert lookup.propose(_seq([7, 1, 2, 3, 9, 1, 2, 3, 4, 5, 6, 0, 2, 3]), 3) == [4, 5, 6]
    assert lookup.propose(_seq([5, 8, 5]), 4) == [8, 5]
    assert lookup.propose(_seq([1, 2, 3, 4]), 4) == []
    assert PromptLookupProposer(min_ngram=2).propose(_seq([1, 2, 9, 2]), 4) == []
