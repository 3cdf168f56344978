"""Batched sampling: one pass over `[batch, vocab]` logits applies every row's own SamplingParams.

Order: (grammar bitmask) -> penalties -> greedy argmax | temperature -> top-k -> top-p -> min-p -> draw.
Logprobs are those of the raw model distribution (before any processing), as in vLLM's default.
Draws invert each row's CDF at one uniform number (one random per row, not per vocabulary entry),
and a seeded row takes its number from its own `torch.Generator`, so it stays reproducible whatever
else is in the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from inference.protocol import TokenLogprob
from inference.sequence import Sequence


def apply_token_bitmask(logits: torch.Tensor, bitmask: torch.Tensor) -> None:
    """Grammar hook: set disallowed tokens to -inf in place.

    `bitmask` is either bool `[batch, vocab]` (True = allowed) or xgrammar's packed int32
    `[batch, ceil(vocab / 32)]` (bit j of word w allows token 32 * w + j).
    """
    bitmask = bitmask.to(logits.device, non_blocking=True)
    if bitmask.dtype != torch.bool:
        bits = torch.arange(32, device=bitmask.device, dtype=torch.int32)
        bitmask = ((bitmask.unsqueeze(-1) >> bits) & 1).bool().flatten(1)[:, : logits.shape[-1]]
    logits.masked_fill_(~bitmask[:, : logits.shape[-1]], float("-inf"))


@dataclass
class SamplerOutput:
    token_ids: list[int]
    logprobs: list[TokenLogprob | None]


def apply_penalties(logits: torch.Tensor, seqs: list[Sequence]) -> None:
    """Repetition penalty over prompt + output tokens (HF/vLLM definition); presence and frequency
    penalties over output tokens (OpenAI definition: logit -= frequency * count + presence * [count > 0])."""
    device, (n, vocab) = logits.device, logits.shape
    rep = torch.tensor([s.params.repetition_penalty for s in seqs], device=device)
    if bool((rep != 1.0).any()):
        seen = torch.zeros(n, vocab, dtype=torch.bool, device=device)
        for i, s in enumerate(seqs):
            seen[i, torch.tensor(s.token_ids, device=device)] = True
        factor = torch.where(logits > 0, 1.0 / rep[:, None], rep[:, None])
        logits.copy_(torch.where(seen, logits * factor, logits))
    freq = torch.tensor([s.params.frequency_penalty for s in seqs], device=device)
    presence = torch.tensor([s.params.presence_penalty for s in seqs], device=device)
    if bool((freq != 0).any() or (presence != 0).any()):
        counts = torch.zeros(n, vocab, device=device)
        for i, s in enumerate(seqs):
            out = torch.tensor(s.output_token_ids, dtype=torch.long, device=device)
            counts[i].index_add_(0, out, torch.ones(len(out), device=device))
        logits -= freq[:, None] * counts + presence[:, None] * (counts > 0)


_CANDIDATES = 256


def _top_k_top_p(logits: torch.Tensor, rows: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> None:
    """Truncate `rows` of `logits` in place to their top-k and nucleus (top-p) tokens.

    NOTE: whole rows are never sorted (a [batch, vocab] sort costs more than a model step on CPU).
    The nucleus lies within the best K candidates whenever their probability mass reaches top_p,
    the common case, and is then exact; flatter rows go to `_top_k_top_p_flat`.
    """
    vocab = logits.shape[-1]
    sub, k_rows, p_rows = logits[rows], top_k[rows], top_p[rows]
    k = min(vocab, max(_CANDIDATES, int(torch.where(k_rows < vocab, k_rows, 0).max())))
    values, order = sub.topk(k, dim=-1)
    probs = (values - sub.logsumexp(dim=-1, keepdim=True)).exp()
    before = probs.cumsum(dim=-1) - probs  # mass strictly before each candidate
    covered = (p_rows >= 1) | (before[:, -1] + probs[:, -1] >= p_rows) | (k == vocab)
    remove = (torch.arange(k, device=logits.device)[None, :] >= k_rows[:, None]) | (before > p_rows[:, None])
    remove[:, 0] = False
    kept = torch.full_like(sub, float("-inf")).scatter_(1, order, values.masked_fill(remove, float("-inf")))
    logits[rows[covered]] = kept[covered]
    if not bool(covered.all()):
        _top_k_top_p_flat(logits, rows[~covered], top_k, top_p)


def _top_k_top_p_flat(
    logits: torch.Tensor, rows: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor
) -> None:
    """Rows whose nucleus is larger than the candidate shortlist: bisect the probability threshold t
    such that the tokens with p >= t hold top_p of the mass (exact up to tokens within 2^-24 of the
    boundary probability); top-k cuts at the k-th largest logit."""
    sub = logits[rows]
    probs = sub.softmax(dim=-1)
    need = top_p[rows][:, None]
    lo, hi = torch.zeros_like(need), probs.max(dim=-1, keepdim=True).values
    for _ in range(24):
        mid = (lo + hi) / 2
        enough = torch.where(probs >= mid, probs, 0).sum(dim=-1, keepdim=True) >= need
        lo, hi = torch.where(enough, mid, lo), torch.where(enough, hi, mid)
    remove = probs < lo
    k_rows = top_k[rows]
    limited = k_rows < sub.shape[-1]
    if bool(limited.any()):
        k_max = int(k_rows[limited].max())
        kth = sub.topk(k_max, dim=-1).values.gather(1, k_rows.clamp(max=k_max)[:, None] - 1)
        remove |= (sub < kth) & limited[:, None]
    logits[rows] = sub.masked_fill(remove, float("-inf"))


def _truncate(logits: torch.Tensor, seqs: list[Sequence]) -> None:
    """Top-k, top-p and min-p in place (removed tokens get -inf); the top token always survives."""
    device, vocab = logits.device, logits.shape[-1]
    top_k = torch.tensor([s.params.top_k or vocab for s in seqs], device=device)
    top_p = torch.tensor([s.params.top_p for s in seqs], device=device)
    rows = ((top_k < vocab) | (top_p < 1)).nonzero().squeeze(1)
    if len(rows):
        _top_k_top_p(logits, rows, top_k, top_p)
    min_p = torch.tensor([s.params.min_p for s in seqs], device=device)
    if bool((min_p > 0).any()):
        probs = logits.softmax(dim=-1)
        logits.masked_fill_(probs < min_p[:, None] * probs.max(dim=-1, keepdim=True).values, float("-inf"))


def token_logprobs(
    raw: torch.Tensor, tokens: torch.Tensor, seqs: list[Sequence]
) -> list[TokenLogprob | None]:
    """Logprob (and top alternatives) of each row's chosen token under the raw distribution, for the
    rows whose request asked for logprobs."""
    wanted = [i for i, s in enumerate(seqs) if s.params.logprobs is not None]
    result: list[TokenLogprob | None] = [None] * len(seqs)
    if not wanted:
        return result
    lp = raw[wanted].log_softmax(dim=-1)
    chosen = lp.gather(1, tokens[wanted, None]).squeeze(1).tolist()
    k = max(seqs[i].params.logprobs for i in wanted)
    top_vals, top_ids = lp.topk(k, dim=-1) if k else (lp[:, :0], lp[:, :0].long())
    top_vals, top_ids = top_vals.tolist(), top_ids.tolist()
    for row, i in enumerate(wanted):
        n = seqs[i].params.logprobs
        result[i] = TokenLogprob(
            int(tokens[i]), chosen[row], dict(zip(top_ids[row][:n], top_vals[row][:n], strict=True))
        )
    return result


def draw(probs: torch.Tensor, generators: list[torch.Generator | None]) -> torch.Tensor:
    """One token per row of (unnormalised) `probs`; a row with a generator takes its random number from it."""
    cdf = probs.cumsum(dim=-1)
    total = cdf[:, -1:]
    u = torch.rand(len(generators), 1, device=probs.device)
    for i, generator in enumerate(generators):
        if generator is not None:
            u[i] = torch.rand(1, generator=generator, device=probs.device)
    # NOTE: u stays strictly below the total so the search always lands on a token with p > 0
    # (right=True skips the flat CDF steps of zero-probability tokens).
    u = torch.minimum(u * total, torch.nextafter(total, torch.zeros_like(total)))
    return torch.searchsorted(cdf, u, right=True).squeeze(1)


def prepare_logits(logits: torch.Tensor, seqs: list[Sequence], bitmask: torch.Tensor | None = None) -> None:
    """Everything before the draw, in place: grammar mask, penalties and, unless every row is greedy,
    temperature and truncation (a greedy row's argmax survives them)."""
    if bitmask is not None:
        apply_token_bitmask(logits, bitmask)
    if any(
        s.params.repetition_penalty != 1 or s.params.presence_penalty or s.params.frequency_penalty
        for s in seqs
    ):
        apply_penalties(logits, seqs)
    if not all(s.params.greedy for s in seqs):
        # NOTE: greedy rows (temperature under GREEDY_TEMPERATURE, 1e-30 say) keep their scale: dividing
        # by such a temperature overflows to +-inf, and the argmax of a row of ties is the first one.
        temperature = torch.tensor(
            [1.0 if s.params.greedy else s.params.temperature for s in seqs], device=logits.device
        )
        logits.div_(temperature[:, None])
        _truncate(logits, seqs)


def sample(logits: torch.Tensor, seqs: list[Sequence], bitmask: torch.Tensor | None = None) -> SamplerOutput:
    """Pick one token per row of `logits` (fp32 `[len(seqs), vocab]`, modified in place)."""
    raw = logits.clone() if any(s.params.logprobs is not None for s in seqs) else logits
    prepare_logits(logits, seqs, bitmask)
    greedy = [s.params.greedy for s in seqs]
    if all(greedy):
        tokens = logits.argmax(dim=-1)
    else:
        tokens = draw(logits.softmax(dim=-1), [s.generator for s in seqs])
        if any(greedy):
            tokens = torch.where(torch.tensor(greedy, device=logits.device), logits.argmax(dim=-1), tokens)
    return SamplerOutput(tokens.tolist(), token_logprobs(raw, tokens, seqs))
