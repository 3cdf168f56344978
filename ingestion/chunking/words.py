"""Word-level view of one segment: every chunker cuts only between whitespace-separated words, so
no chunk ever ends inside a word, and the token count of any run of words is a prefix-sum lookup
into one tokenisation of the segment (with the embedding model's own tokenizer).

Memory follows the words, not the tokenizer: word offsets and counts are numpy arrays (8 bytes a
number, where Python tuples cost ~60), and the segment is tokenised in pieces of about
`PIECE_CHARS` (a 10 MB segment tokenised whole held ~1.4 GB of encodings and offset tuples).
"""

from __future__ import annotations

import re

import numpy as np

_WORD = re.compile(r"\S+")
_SENTENCE_END = re.compile(r"[.!?…。！？][\"'”’)\]]*$")
PIECE_CHARS = 65_536

# Boundary strength between two words, strongest first: blank line, line break, sentence end, space.
PARAGRAPH, LINE, SENTENCE, WORD = 0, 1, 2, 3


class WordIndex:
    def __init__(self, text: str, start: int, end: int, tokenizer) -> None:
        self.text = text
        spans = np.fromiter(
            (x for m in _WORD.finditer(text, start, end) for x in m.span()), dtype=np.int64
        ).reshape(-1, 2)
        self.starts, self.ends = spans[:, 0].copy(), spans[:, 1].copy()
        counts = np.zeros(len(self.starts), dtype=np.int64)
        for lo, hi in _pieces(self.starts, PIECE_CHARS):
            counts[lo:hi] = self._piece_counts(tokenizer, start, end, lo, hi)
        self.prefix = np.concatenate(([0], np.cumsum(counts)))

    def _piece_counts(self, tokenizer, start: int, end: int, lo: int, hi: int) -> np.ndarray:
        """Tokens of words [lo, hi), each token counted in the word holding its last character
        (SentencePiece tokens may start on the preceding space; a token ending in the gap after a
        word is that word's).

        NOTE: the piece reaches one word past each side (the segment's own ends at its ends), so
        every word it counts is tokenised with the same neighbours as in the whole segment: exact
        for tokenizers that split at whitespace first (WordPiece, byte-level BPE, Metaspace), which
        tests/ingestion/test_chunking.py checks against whole-segment counts.
        """
        n = len(self.starts)
        left = int(self.starts[lo - 1]) if lo else start
        right = int(self.ends[hi]) if hi < n else end
        enc = tokenizer(
            self.text[left:right], add_special_tokens=False, return_offsets_mapping=True, verbose=False
        )
        offsets = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
        last = offsets[offsets[:, 1] > offsets[:, 0], 1] - 1 + left
        keep = (last >= self.starts[lo]) if lo else np.ones(len(last), dtype=bool)
        if hi < n:
            keep &= last < self.starts[hi]
        words = np.maximum(0, np.searchsorted(self.starts, last[keep], side="right") - 1)
        return np.bincount(words - lo, minlength=hi - lo)

    def __len__(self) -> int:
        return len(self.starts)

    def tokens(self, i: int, j: int) -> int:
        """Tokens in words [i, j)."""
        return int(self.prefix[j] - self.prefix[i])

    def char_span(self, i: int, j: int) -> tuple[int, int]:
        return int(self.starts[i]), int(self.ends[j - 1])

    def span_text(self, i: int, j: int) -> str:
        start, end = self.char_span(i, j)
        return self.text[start:end]

    def ends_sentence(self, k: int) -> bool:
        return bool(_SENTENCE_END.search(self.text, int(self.starts[k]), int(self.ends[k])))

    def boundary_levels(self) -> list[int]:
        """levels[k] is the strength of the boundary before word k (levels[0] is unused)."""
        levels = [PARAGRAPH]
        for k in range(1, len(self.starts)):
            newlines = self.text.count("\n", int(self.ends[k - 1]), int(self.starts[k]))
            if newlines >= 2:
                levels.append(PARAGRAPH)
            elif newlines == 1:
                levels.append(LINE)
            else:
                levels.append(SENTENCE if self.ends_sentence(k - 1) else WORD)
        return levels


def _pieces(starts: np.ndarray, chars: int) -> list[tuple[int, int]]:
    """Word ranges [lo, hi) whose starts span about `chars` characters each."""
    if not len(starts):
        return []
    cuts = np.searchsorted(starts, np.arange(int(starts[0]) + chars, int(starts[-1]) + 1, chars))
    bounds = [0, *sorted({int(c) for c in cuts if 0 < c < len(starts)}), len(starts)]
    return list(zip(bounds, bounds[1:], strict=False))
