"""Reciprocal Rank Fusion (Cormack et al., 2009): score(d) = sum_r w_r / (k + rank_r(d))."""

from __future__ import annotations

import uuid

from core.settings.retrieval import FusionConfig
from retrieval.types import Hit


class RRFFusion:
    """Fuses named rankings; each hit keeps every input stage's score and rank for debug output."""

    name = "rrf"

    def __init__(self, config: FusionConfig | None = None) -> None:
        self.config = config or FusionConfig()

    def run(self, rankings: dict[str, list[Hit]]) -> list[Hit]:
        fused: dict[uuid.UUID, Hit] = {}
        for name, hits in rankings.items():
            # Multi-query rankings are named "<retriever>#<query index>"; weights are per retriever.
            weight = self.config.weights.get(name.split("#")[0], 1.0)
            for rank, hit in enumerate(hits, start=1):
                out = fused.setdefault(hit.chunk_id, Hit(hit.chunk_id, 0.0))
                out.score += weight / (self.config.k + rank)
                for stage, score in hit.scores.items():
                    out.scores.setdefault(stage, score)
                for stage, stage_rank in hit.ranks.items():
                    out.ranks.setdefault(stage, stage_rank)
                out.ranks.setdefault(name, rank)
        result = sorted(fused.values(), key=lambda h: (-h.score, str(h.chunk_id)))
        for rank, hit in enumerate(result, start=1):
            hit.scores[self.name] = hit.score
            hit.ranks[self.name] = rank
        return result
