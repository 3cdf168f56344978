"""Retrieval for question answering: search the asked collections and turn hits into sources."""

from __future__ import annotations

from sqlalchemy.orm import Session

from agents.qa.boundaries import with_document_context
from agents.qa.neighbors import expand_neighbors
from agents.qa.sources import Source
from core.models import Collection
from core.offload import off_loop
from core.settings import Settings
from core.settings.retrieval import RetrievalConfig
from core.tracing import traced
from inference.client import ChatBackend
from retrieval.fusion import RRFFusion
from retrieval.models import RetrievalModels
from retrieval.pipeline import ResultChunk
from retrieval.service import SearchRequest, request_config, search
from retrieval.types import Hit


def relevance(hit: ResultChunk) -> float:
    """How sure we are that a hit is about the question, on a cosine-like scale: the dense
    similarity where the dense retriever saw the chunk; a lexical-only match counts as relevant."""
    if "dense" in hit.scores:
        return float(hit.scores["dense"])
    return 1.0 if hit.scores.get("bm25", 0.0) > 0 else 0.0


def to_source(hit: ResultChunk, rank: int) -> Source:
    return Source(
        number=0,  # set when the sources are laid out
        chunk_id=str(hit.chunk_id),
        document_id=str(hit.document_id),
        title=hit.title or hit.source_id,
        text=hit.text,
        score=relevance(hit),
        page=hit.page,
        char_start=hit.char_start,
        char_end=hit.char_end,
        source_id=hit.source_id,
        rank=rank,
        headings=tuple(hit.heading_path or ()),
    )


@traced("retrieval")
async def retrieve_sources(
    session: Session,
    settings: Settings,
    collections: list[Collection],
    request: SearchRequest,
    models: RetrievalModels,
    llm: ChatBackend | None,
    configs: list[RetrievalConfig] | None = None,
) -> tuple[list[Source], dict[str, float]]:
    """Best-first sources across `collections` (rank-fused when several) and timings in ms;
    `llm`: what query transforms and the LLM reranker call (`LLMProvider.retrieval_backend`);
    `configs`: each collection's `request_config`, when the caller resolved them already."""
    configs = configs or [request_config(settings.retrieval, c, request) for c in collections]
    rankings: list[list[ResultChunk]] = []
    timings: dict[str, float] = {}
    radius: dict[str, int] = {}
    for collection, config in zip(collections, configs, strict=True):
        result = await search(
            session, settings.retrieval, collection, request, models, llm=llm, config=config
        )
        rankings.append(result.results)
        radius.update({str(hit.chunk_id): config.neighbors for hit in result.results})
        for stage, ms in result.timings_ms.items():
            key = "retrieval_ms" if stage == "total" else f"{stage}_ms"
            timings[key] = timings.get(key, 0.0) + ms
    by_id = {hit.chunk_id: hit for ranking in rankings for hit in ranking}
    fused = RRFFusion(settings.retrieval.fusion).run(
        {f"collection#{i}": [Hit(h.chunk_id, h.score) for h in ranking] for i, ranking in enumerate(rankings)}
    )
    ranked = [by_id[h.chunk_id] for h in fused]
    top_k = request.top_k or settings.qa.top_k
    sources = [to_source(hit, rank) for rank, hit in enumerate(ranked[:top_k])]
    return await off_loop(_in_context, session, sources, radius), timings


def _in_context(session: Session, sources: list[Source], radius: dict[str, int]) -> list[Source]:
    return with_document_context(session, expand_neighbors(session, sources, radius))
