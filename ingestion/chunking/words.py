"""Word-level view of one segment: every chunker cuts only between whitespace-separated words, so
no chunk ever ends inside a word, and the token count of any run of words is a prefix-sum lookup
into one tokenisation of the segment (with the embedding model's own tokenizer).

NOTE: bounded memory for long texts: word offsets and counts live in compact arrays (8 bytes a
word, not a tuple object), and the segment is tokenised in pieces of at most `PIECE_CHARS` cut
between words, asking for offsets only. Whole, a 10 MB text made the tokenizer's Python lists of
offsets, ids and masks for ~2.5M tokens at once (gigabytes).
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_right

_WORD = re.compile(r"\S+")
_SENTENCE_END = re.compile(r"[.!?…。！？][\"'”’)\]]*$")

# Boundary strength between two words, strongest first: blank line, line break, sentence end, space.
PARAGRAPH, LINE, SENTENCE, WORD = 0, 1, 2, 3
PIECE_CHARS = 100_000


class WordIndex:
    def __init__(self, text: str, start: int, end: int, tokenizer) -> None:
        self.text = text
        self.starts, self.ends = array("q"), array("q")
        for m in _WORD.finditer(text, start, end):
            self.starts.append(m.start())
            self.ends.append(m.end())
        self.prefix = array("q", [0])
        total, i, n = 0, 0, len(self.starts)
        while i < n:
            j = max(i + 1, bisect_right(self.starts, self.starts[i] + PIECE_CHARS, i + 1))
            base = self.starts[i]
            local = array("q", (s - base for s in self.starts[i:j]))
            counts = [0] * (j - i)
            enc = tokenizer(
                text[base : self.ends[j - 1]],
                add_special_tokens=False,
                return_offsets_mapping=True,
                return_attention_mask=False,
                return_token_type_ids=False,
                verbose=False,
            )
            for a, b in enc["offset_mapping"]:
                if b > a:
                    # NOTE: the token's last character locates its word; SentencePiece tokens may
                    # start on the preceding space.
                    counts[max(0, bisect_right(local, b - 1) - 1)] += 1
            del enc
            for c in counts:
                total += c
                self.prefix.append(total)
            i = j

    def __len__(self) -> int:
        return len(self.starts)

    def tokens(self, i: int, j: int) -> int:
        """Tokens in words [i, j)."""
        return self.prefix[j] - self.prefix[i]

    def char_span(self, i: int, j: int) -> tuple[int, int]:
        return self.starts[i], self.ends[j - 1]

    def span_text(self, i: int, j: int) -> str:
        start, end = self.char_span(i, j)
        return self.text[start:end]

    def ends_sentence(self, k: int) -> bool:
        return bool(_SENTENCE_END.search(self.text, self.starts[k], self.ends[k]))

    def boundary_levels(self) -> list[int]:
        """levels[k] is the strength of the boundary before word k (levels[0] is unused)."""
        levels = [PARAGRAPH]
        for k in range(1, len(self.starts)):
            gap = self.text[self.ends[k - 1] : self.starts[k]]
            newlines = gap.count("\n")
            if newlines >= 2:
                levels.append(PARAGRAPH)
            elif newlines == 1:
                levels.append(LINE)
            else:
                levels.append(SENTENCE if self.ends_sentence(k - 1) else WORD)
        return levels
