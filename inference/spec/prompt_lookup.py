"""Prompt lookup: propose the tokens that followed the latest earlier occurrence of the context's tail.

No extra model: answers that quote their context (RAG, code edits, summaries) repeat long spans of
the prompt, and the n-gram ending the sequence finds where such a span continues.

NOTE: the default shortest n-gram is 2: on SmolLM2 answers quoting their context (benchmarks/
engine_spec.py), guesses after a lone matching token were accepted 0.3 tokens per guess against 0.8
after 3-grams, and on CPU a verifying pass costs ~1.4 decodes, so they slowed decoding down.
"""

from __future__ import annotations

import numpy as np

from inference.sequence import Sequence
from inference.spec import Proposal


class PromptLookupProposer:
    def __init__(self, max_ngram: int = 5, min_ngram: int = 2) -> None:
        self.max_ngram, self.min_ngram = max_ngram, min_ngram

    def propose(self, seq: Sequence, k: int) -> Proposal:
        tokens = np.asarray(seq.token_ids)
        length = len(tokens)
        # Longer n-grams first: their continuations are more often right.
        for n in range(min(self.max_ngram, length - 1), self.min_ngram - 1, -1):
            starts = length - n  # candidate windows start in [0, length - n) (the tail itself excluded)
            match = np.ones(starts, dtype=bool)
            for j in range(n):
                match &= tokens[j : starts + j] == tokens[length - n + j]
            hits = np.flatnonzero(match)
            if len(hits):
                follow = int(hits[-1]) + n
                return Proposal(tokens[follow : follow + k].tolist())
        return Proposal([])

    def forget(self, request_id: str) -> None:
        pass  # stateless
