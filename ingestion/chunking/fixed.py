"""Fixed-size token windows with overlap, cut between words."""

from __future__ import annotations

import numpy as np

from ingestion.chunking.words import WordIndex


def fixed_windows(index: WordIndex, size: int, overlap: int) -> list[tuple[int, int]]:
    """Word ranges of at most `size` tokens; each window repeats up to `overlap` tokens of the last.

    A single word longer than `size` tokens becomes a window of its own (never cut inside a word).
    """
    n, prefix = len(index), index.prefix
    windows: list[tuple[int, int]] = []
    i = 0
    while i < n:
        j = max(i + 1, int(np.searchsorted(prefix, prefix[i] + size, side="right")) - 1)
        windows.append((i, j))
        if j >= n:
            break
        # The next window starts at the earliest word whose run to j fits in the overlap budget.
        i = max(i + 1, int(np.searchsorted(prefix, prefix[j] - overlap))) if overlap > 0 else j
    return windows
