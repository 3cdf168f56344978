"""Word-level view of one segment: every chunker cuts only between whitespace-separated words, so
no chunk ever ends inside a word, and the token count of any run of words is a prefix-sum lookup
into a single tokenisation of the segment (with the embedding model's own tokenizer).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import accumulate

_WORD = re.compile(r"\S+")
_SENTENCE_END = re.compile(r"[.!?…。！？][\"'”’)\]]*$")

# Boundary strength between two words, strongest first: blank line, line break, sentence end, space.
PARAGRAPH, LINE, SENTENCE, WORD = 0, 1, 2, 3


class WordIndex:
    def __init__(self, text: str, start: int, end: int, tokenizer) -> None:
        segment = text[start:end]
        self.text = text
        self.spans = [(m.start() + start, m.end() + start) for m in _WORD.finditer(segment)]
        local_starts = [s - start for s, _ in self.spans]
        counts = [0] * len(self.spans)
        if self.spans:
            enc = tokenizer(segment, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
            for a, b in enc["offset_mapping"]:
                if b > a:
                    # NOTE: the token's last character locates its word; SentencePiece tokens may
                    # start on the preceding space.
                    counts[max(0, bisect_right(local_starts, b - 1) - 1)] += 1
        self.prefix = [0, *accumulate(counts)]

    def __len__(self) -> int:
        return len(self.spans)

    def tokens(self, i: int, j: int) -> int:
        """Tokens in words [i, j)."""
        return self.prefix[j] - self.prefix[i]

    def char_span(self, i: int, j: int) -> tuple[int, int]:
        return self.spans[i][0], self.spans[j - 1][1]

    def span_text(self, i: int, j: int) -> str:
        start, end = self.char_span(i, j)
        return self.text[start:end]

    def ends_sentence(self, k: int) -> bool:
        start, end = self.spans[k]
        return bool(_SENTENCE_END.search(self.text[start:end]))

    def boundary_levels(self) -> list[int]:
        """levels[k] is the strength of the boundary before word k (levels[0] is unused)."""
        levels = [PARAGRAPH]
        for k in range(1, len(self.spans)):
            gap = self.text[self.spans[k - 1][1] : self.spans[k][0]]
            newlines = gap.count("\n")
            if newlines >= 2:
                levels.append(PARAGRAPH)
            elif newlines == 1:
                levels.append(LINE)
            else:
                levels.append(SENTENCE if self.ends_sentence(k - 1) else WORD)
        return levels
