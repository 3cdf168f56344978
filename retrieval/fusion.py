"""Fusion of named rankings into one.

- RRF (Cormack et al., 2009): score(d) = sum_r w_r / (k + rank_r(d)); scores are ignored.
- Convex combination (Bruch et al., 2023, "An Analysis of Fusion Functions for Hybrid Retrieval"):
  score(d) = alpha * norm(dense(d)) + (1 - alpha) * norm(bm25(d)). Normalisation `minmax` maps each
  ranking's observed [min, max] to [0, 1]; `tm2c2` uses the retriever's theoretical minimum (0 for
  BM25, -1 for cosine) and the observed maximum, so it does not depend on how deep the list is.
  A document a retriever did not return is scored as that list's lowest score when the list was cut
  at its requested depth (its real score is at most that), so a shallow list does not sink what it
  missed to the theoretical minimum; a list shorter than its depth is exhaustive (e.g. BM25 found
  every chunk with a query term), so what it missed scores the normalisation minimum. Fused scores
  count from those floors: 0 for a document every list missed, 1 at most.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from core.settings.retrieval import FusionConfig
from core.tracing import traced
from retrieval.types import Hit

# Lower bounds of each retriever's raw score (tm2c2): BM25 is non-negative, cosine is >= -1.
_THEORETICAL_MIN = {"bm25": 0.0, "dense": -1.0}


def _retriever(name: str) -> str:
    # Multi-query rankings are named "<retriever>#<query index>"; weights are per retriever.
    return name.split("#")[0]


def _merge(
    rankings: dict[str, list[Hit]], contribution: Callable[[str, int, Hit], float], stage: str
) -> list[Hit]:
    """Sum each ranking's contribution per chunk; every hit keeps each input stage's score and rank."""
    fused: dict[uuid.UUID, Hit] = {}
    for name, hits in rankings.items():
        for rank, hit in enumerate(hits, start=1):
            out = fused.setdefault(hit.chunk_id, Hit(hit.chunk_id, 0.0))
            out.score += contribution(name, rank, hit)
            for s, score in hit.scores.items():
                out.scores.setdefault(s, score)
            for s, stage_rank in hit.ranks.items():
                out.ranks.setdefault(s, stage_rank)
            out.ranks.setdefault(name, rank)
    result = sorted(fused.values(), key=lambda h: (-h.score, str(h.chunk_id)))
    for rank, hit in enumerate(result, start=1):
        hit.scores[stage] = hit.score
        hit.ranks[stage] = rank
    return result


class RRFFusion:
    """Reciprocal Rank Fusion with per-retriever weights (`fusion.k`, `fusion.weights`)."""

    name = "rrf"

    def __init__(self, config: FusionConfig | None = None) -> None:
        self.config = config or FusionConfig()

    def run(self, rankings: dict[str, list[Hit]]) -> list[Hit]:
        k, weights = self.config.k, self.config.weights

        def contribution(name: str, rank: int, _hit: Hit) -> float:
            return weights.get(_retriever(name), 1.0) / (k + rank)

        return _merge(rankings, contribution, self.name)


class ConvexFusion:
    """alpha * dense + (1 - alpha) * bm25 over normalised scores (`fusion.alpha`, `fusion.normalization`).
    Several rankings of one retriever (multi-query) share its weight equally."""

    name = "convex"

    def __init__(self, config: FusionConfig | None = None, depths: dict[str, int] | None = None) -> None:
        self.config = config or FusionConfig(method="convex")
        self.depths = depths or {}  # retriever -> results asked for; unknown: the list was cut

    def _bounds(self, name: str, hits: list[Hit]) -> tuple[float, float, float]:
        """(normalisation minimum, maximum, the score of what the list missed)."""
        scores = [h.scores.get(_retriever(name), h.score) for h in hits]
        top, lowest = max(scores), min(scores)
        low = lowest
        if self.config.normalization == "tm2c2" and _retriever(name) in _THEORETICAL_MIN:
            low = min(_THEORETICAL_MIN[_retriever(name)], lowest)
        exhaustive = len(hits) < self.depths.get(_retriever(name), len(hits) + 1)
        return low, top, low if exhaustive else lowest

    def run(self, rankings: dict[str, list[Hit]]) -> list[Hit]:
        alpha = self.config.alpha
        per_retriever: dict[str, int] = {}
        for name in rankings:
            per_retriever[_retriever(name)] = per_retriever.get(_retriever(name), 0) + 1
        bounds = {name: self._bounds(name, hits) for name, hits in rankings.items() if hits}

        def contribution(name: str, _rank: int, hit: Hit) -> float:
            retriever = _retriever(name)
            weight = alpha if retriever == "dense" else 1 - alpha if retriever == "bm25" else 1.0
            low, top, floor = bounds[name]
            if top <= low:
                return weight / per_retriever[retriever]
            raw = hit.scores.get(retriever, hit.score)
            return weight / per_retriever[retriever] * (raw - floor) / (top - low)

        return _merge(rankings, contribution, self.name)


@traced("retrieval.fusion")
def fuse(
    config: FusionConfig, rankings: dict[str, list[Hit]], depths: dict[str, int] | None = None
) -> list[Hit]:
    """The configured fusion of several rankings (a single ranking passes through unchanged);
    `depths`: how many results each retriever was asked for (convex: see the module note)."""
    if len(rankings) == 1:
        return next(iter(rankings.values()))
    fusion = ConvexFusion(config, depths) if config.method == "convex" else RRFFusion(config)
    return fusion.run(rankings)
