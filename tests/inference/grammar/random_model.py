"""A "random model": seeded random logits over the real vocabulary, masked by the grammars."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from inference.grammar import GrammarService, SequenceGrammar


@dataclass
class Generation:
    text: str
    token_ids: list[int]
    finish_reason: str  # "stop" when the grammar terminated, "length" when max_tokens cut it


def generate(
    service: GrammarService,
    grammars: list[SequenceGrammar],
    tokenizer,
    *,
    max_tokens: int,
    seed: int,
    bias: torch.Tensor | None = None,
    prefix_ids: tuple[int, ...] = (),
) -> list[Generation]:
    """Decode all `grammars` as one batch; `bias` ([vocab]) is added to every step's logits.

    `prefix_ids` are forced first, as if the model had chosen them (counted in `max_tokens`).
    """
    gen = torch.Generator().manual_seed(seed)
    masker = service.bitmask()
    for grammar in grammars:
        assert all(grammar.accept(t) for t in prefix_ids), "the grammar rejects the forced prefix"
    outputs: list[list[int]] = [list(prefix_ids) for _ in grammars]
    active = list(range(len(grammars)))
    for _ in range(max_tokens - len(prefix_ids)):
        if not active:
            break
        # NOTE: argmax over fresh Gaussian logits is already a random draw (uniform over the
        # allowed tokens without bias), and much cheaper than sampling from a softmax.
        logits = torch.randn(len(active), service.vocab_size, generator=gen)
        if bias is not None:
            logits += bias
        masker.apply(logits, [grammars[i] for i in active])
        tokens = logits.argmax(-1).tolist()
        for row, token in zip(active, tokens, strict=True):
            assert grammars[row].accept(token), "the mask let through a token the grammar rejects"
            if not grammars[row].is_terminated():
                outputs[row].append(token)
        active = [i for i in active if not grammars[i].is_terminated()]
    return [
        Generation(tokenizer.decode(ids), ids, grammars[i].finish_reason() or "length")
        for i, ids in enumerate(outputs)
    ]
