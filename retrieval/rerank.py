"""Rerankers: top-N fused candidates in, the same candidates re-ordered out (caller cuts top-n)."""

from __future__ import annotations

import asyncio
import threading
from typing import Protocol

from core.registry import resolve_model
from core.settings.retrieval import RerankConfig
from core.tracing import traced
from retrieval.llm import RelevanceJudge
from retrieval.types import Hit

_CE_CACHE: dict[str, object] = {}
_CE_LOCK = threading.Lock()


class Reranker(Protocol):
    name: str

    async def run(self, query: str, hits: list[Hit], texts: dict) -> list[Hit]: ...


def _reorder(name: str, hits: list[Hit], scores: list[float]) -> list[Hit]:
    for hit, score in zip(hits, scores, strict=True):
        hit.score = float(score)
        hit.scores[name] = float(score)
    out = sorted(hits, key=lambda h: -h.score)
    for rank, hit in enumerate(out, start=1):
        hit.ranks[name] = rank
    return out


def load_cross_encoder(spec: str):
    """One sentence-transformers CrossEncoder per spec (registry name, local path or hub id)."""
    with _CE_LOCK:
        if spec not in _CE_CACHE:
            from sentence_transformers import CrossEncoder

            _CE_CACHE[spec] = CrossEncoder(str(resolve_model(spec).path), device="cpu")
        return _CE_CACHE[spec]


class CrossEncoderReranker:
    """Scores (query, chunk text) pairs with a cross-encoder, `batch_size` pairs per forward."""

    name = "rerank"

    def __init__(self, config: RerankConfig) -> None:
        if not config.model:
            raise ValueError("a cross-encoder reranker needs rerank.model")
        self.config = config
        self.model = load_cross_encoder(config.model)

    @traced("retrieval.rerank", {"groundwork.reranker": "cross-encoder"})
    async def run(self, query: str, hits: list[Hit], texts: dict) -> list[Hit]:
        if not hits:
            return hits
        pairs = [(query, texts[h.chunk_id][: self.config.max_chars]) for h in hits]
        scores = await asyncio.to_thread(
            self.model.predict, pairs, batch_size=self.config.batch_size, show_progress_bar=False
        )
        return _reorder(self.name, hits, [float(s) for s in scores])


SYSTEM_PROMPT = (
    "You judge search results. Given a query and a passage, answer 'yes' if the passage is relevant "
    "to the query (it answers it or helps to), otherwise 'no'. Answer with one word: yes or no."
)


def judge_messages(query: str, passage: str) -> list[dict]:
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"Query: {query}\n\nPassage: {passage}\n\nIs the passage relevant?"},
    ]


class LLMReranker:
    """Pointwise LLM reranking: score = log P(yes) - log P(no) of the first answer token.

    All candidates are judged concurrently so the engine batches them (`batch_size` at a time).
    """

    name = "rerank"

    def __init__(self, config: RerankConfig, judge: RelevanceJudge) -> None:
        self.config = config
        self.judge = judge

    async def score(self, query: str, passage: str) -> float:
        yes, no = await self.judge.verdict(judge_messages(query, passage[: self.config.max_chars]))
        return yes - no

    @traced("retrieval.rerank", {"groundwork.reranker": "llm"})
    async def run(self, query: str, hits: list[Hit], texts: dict) -> list[Hit]:
        scores: list[float] = []
        step = self.config.batch_size
        for start in range(0, len(hits), step):
            batch = hits[start : start + step]
            scores += await asyncio.gather(*(self.score(query, texts[h.chunk_id]) for h in batch))
        return _reorder(self.name, hits, scores)
