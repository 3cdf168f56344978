"""Semantic chunking: embed each sentence, cut where the similarity of adjacent sentences drops
below the segment's `percentile`-th distance, then cap each group at the token budget."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ingestion.chunking.recursive import recursive_spans
from ingestion.chunking.words import PARAGRAPH, WordIndex


def semantic_spans(
    index: WordIndex, size: int, embedder, percentile: float, between: Callable[[], None] | None = None
) -> list[tuple[int, int]]:
    levels = index.boundary_levels()
    # NOTE: a lone line break is no sentence boundary here: PDF text wraps lines mid-sentence.
    cuts = [k for k in range(1, len(index)) if levels[k] == PARAGRAPH or index.ends_sentence(k - 1)]
    sentences = list(zip([0, *cuts], [*cuts, len(index)], strict=True))
    if len(sentences) < 3:
        return recursive_spans(index, size, levels=levels)
    vectors = embedder.encode([index.span_text(a, b) for a, b in sentences], between=between)
    distances = 1.0 - np.sum(vectors[:-1] * vectors[1:], axis=1)
    threshold = float(np.percentile(distances, percentile))
    out: list[tuple[int, int]] = []
    start = 0
    for k, distance in enumerate(distances):
        if distance > threshold:
            end = sentences[k][1]
            out.extend(recursive_spans(index, size, start, end, levels))
            start = end
    out.extend(recursive_spans(index, size, start, len(index), levels))
    return out
