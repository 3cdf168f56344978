"""Fusion of named rankings into one.

- RRF (Cormack et al., 2009): score(d) = sum_r w_r / (k + rank_r(d)); scores are ignored.
- Convex combination (Bruch et al., 2023, "An Analysis of Fusion Functions for Hybrid Retrieval"):
  score(d) = alpha * norm(dense(d)) + (1 - alpha) * norm(bm25(d)). Normalisation `minmax` maps each
  ranking's observed [min, max] to [0, 1]; `tm2c2` uses the retriever's theoretical minimum (0 for
  BM25, -1 for cosine) and the observed maximum, so it does not depend on how deep the list is.
  A document a retriever did not return counts as that retriever's lower bound (normalised 0).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from core.settings.retrieval import FusionConfig
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

    def __init__(self, config: FusionConfig | None = None) -> None:
        self.config = config or FusionConfig(method="convex")

    def _bounds(self, name: str, hits: list[Hit]) -> tuple[float, float]:
        scores = [h.scores.get(_retriever(name), h.score) for h in hits]
        top = max(scores)
        if self.config.normalization == "tm2c2" and _retriever(name) in _THEORETICAL_MIN:
            low = min(_THEORETICAL_MIN[_retriever(name)], min(scores))
        else:
            low = min(scores)
        return low, top

    def run(self, rankings: dict[str, list[Hit]]) -> list[Hit]:
        alpha = self.config.alpha
        per_retriever: dict[str, int] = {}
        for name in rankings:
            per_retriever[_retriever(name)] = per_retriever.get(_retriever(name), 0) + 1
        bounds = {name: self._bounds(name, hits) for name, hits in rankings.items() if hits}

        def contribution(name: str, _rank: int, hit: Hit) -> float:
            retriever = _retriever(name)
            weight = alpha if retriever == "dense" else 1 - alpha if retriever == "bm25" else 1.0
            low, top = bounds[name]
            raw = hit.scores.get(retriever, hit.score)
            norm = (raw - low) / (top - low) if top > low else 1.0
            return weight / per_retriever[retriever] * norm

        return _merge(rankings, contribution, self.name)


def fuse(config: FusionConfig, rankings: dict[str, list[Hit]]) -> list[Hit]:
    """The configured fusion of several rankings (a single ranking passes through unchanged)."""
    if len(rankings) == 1:
        return next(iter(rankings.values()))
    fusion = ConvexFusion(config) if config.method == "convex" else RRFFusion(config)
    return fusion.run(rankings)
