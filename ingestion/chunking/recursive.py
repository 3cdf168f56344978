"""Recursive splitting: cut at the strongest boundaries present (paragraph, then line, sentence,
word) and pack neighbouring pieces up to the token budget."""

from __future__ import annotations

from ingestion.chunking.words import WordIndex


def recursive_spans(
    index: WordIndex, size: int, lo: int = 0, hi: int | None = None, levels: list[int] | None = None
) -> list[tuple[int, int]]:
    hi = len(index) if hi is None else hi
    if hi <= lo:
        return []
    if index.tokens(lo, hi) <= size or hi - lo == 1:
        return [(lo, hi)]
    levels = levels if levels is not None else index.boundary_levels()
    strongest = min(levels[lo + 1 : hi])
    cuts = [k for k in range(lo + 1, hi) if levels[k] == strongest]
    pieces = list(zip([lo, *cuts], [*cuts, hi], strict=True))
    out: list[tuple[int, int]] = []
    start = None
    for a, b in pieces:
        if start is not None and index.tokens(start, b) <= size:
            continue  # piece joins the current chunk
        if start is not None:
            out.append((start, a))
        if index.tokens(a, b) > size:
            out.extend(recursive_spans(index, size, a, b, levels))
            start = None
        else:
            start = a
    if start is not None:
        out.append((start, hi))
    return out
