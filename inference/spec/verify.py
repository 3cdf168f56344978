"""Verification of proposed tokens against the target model, one position at a time.

Rejection sampling (Leviathan et al. 2023): a guess x drawn from q is kept with probability
min(1, p(x) / q(x)); otherwise the token is drawn from norm(max(0, p - q)). The kept-or-redrawn token
is distributed exactly as p. A deterministic guess (prompt lookup, greedy draft) is a point mass q.
"""

from __future__ import annotations

import torch

from inference.protocol import TokenLogprob
from inference.sampling import draw, prepare_logits, token_logprobs
from inference.sequence import Sequence


def accept_or_resample(
    p: torch.Tensor, q: torch.Tensor | None, guess: int, generator: torch.Generator | None = None
) -> tuple[int, bool]:
    """(token, accepted) for a `guess` drawn from `q` (`[vocab]`; None: a point mass on `guess`),
    with `p` the target's distribution (`[vocab]`)."""
    u = float(torch.rand(1, generator=generator, device=p.device))
    q_guess = 1.0 if q is None else float(q[guess])
    if u * q_guess < float(p[guess]):
        return guess, True
    if q is None:
        residual = p.clone()
        residual[guess] = 0
    else:
        residual = (p - q).clamp_min_(0)
    if float(residual.sum()) <= 0:  # p == q up to rounding: any draw from p is right
        residual = p
    return int(draw(residual[None], [generator])[0]), False


def verify_token(
    logits: torch.Tensor,
    seq: Sequence,
    bitmask: torch.Tensor | None,
    guess: int | None,
    q: torch.Tensor | None,
) -> tuple[int, bool, TokenLogprob | None]:
    """The token `seq` emits at one position given the target's `logits` (`[1, vocab]`, modified in
    place), whether it is the `guess`, and its logprob; `guess` None means a plain draw (the bonus
    position after every guess was accepted)."""
    raw = logits.clone() if seq.params.logprobs is not None else logits
    prepare_logits(logits, [seq], bitmask)
    if seq.params.greedy:
        token = int(logits.argmax())
        accepted = token == guess
    elif guess is None:
        token, accepted = int(draw(logits.softmax(dim=-1), [seq.generator])[0]), False
    else:
        token, accepted = accept_or_resample(logits.softmax(dim=-1)[0], q, guess, seq.generator)
    return token, accepted, token_logprobs(raw, torch.tensor([token], device=logits.device), [seq])[0]
