"""Rerankers: top-N fused candidates in, the same candidates re-ordered out (caller cuts top-n)."""

from __future__ import annotations

import asyncio
import math
from typing import Any, Protocol

from core.settings.retrieval import RerankConfig
from core.tracing import traced
from inference.client import ChatBackend
from retrieval.types import Hit

# NOTE: the engine and OpenAI servers return at most 20 top logprobs; a verdict missing from
# them gets this logprob, below anything the model found plausible.
_ABSENT = -30.0


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


class CrossEncoderReranker:
    """Scores (query, chunk text) pairs with a cross-encoder, `batch_size` pairs per forward."""

    name = "rerank"

    def __init__(self, config: RerankConfig, model: Any) -> None:
        """`model`: the CrossEncoder of `config.model` (RetrievalModels.cross_encoder)."""
        self.config = config
        self.model = model

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


def verdict_logprobs(top: dict[str, float]) -> tuple[float, float]:
    """(log P(yes), log P(no)) from top next-token logprobs keyed by token text; spellings such as
    "Yes", " yes" and "YES" are one verdict (their probabilities add up)."""
    mass = {"yes": 0.0, "no": 0.0}
    for token, logprob in top.items():
        word = token.strip().lower()
        if word in mass:
            mass[word] += math.exp(logprob)
    return tuple(math.log(m) if m > 0 else _ABSENT for m in (mass["yes"], mass["no"]))  # type: ignore[return-value]


class LLMReranker:
    """Pointwise LLM reranking: score = log P(yes) - log P(no) of the first answer token, from the
    chat backend's `top_logprobs` (our engine or any OpenAI-compatible server returning them).

    All candidates are judged concurrently so the engine batches them (`batch_size` at a time).
    """

    name = "rerank"

    def __init__(self, config: RerankConfig, llm: ChatBackend) -> None:
        self.config = config
        self.llm = llm

    async def score(self, query: str, passage: str) -> float:
        top = await self.llm.top_logprobs(judge_messages(query, passage[: self.config.max_chars]))
        yes, no = verdict_logprobs(top)
        return yes - no

    @traced("retrieval.rerank", {"groundwork.reranker": "llm"})
    async def run(self, query: str, hits: list[Hit], texts: dict) -> list[Hit]:
        scores: list[float] = []
        step = self.config.batch_size
        for start in range(0, len(hits), step):
            batch = hits[start : start + step]
            scores += await asyncio.gather(*(self.score(query, texts[h.chunk_id]) for h in batch))
        return _reorder(self.name, hits, scores)
