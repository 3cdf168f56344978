"""The search pipeline: [query transform] -> BM25 and/or dense -> fusion -> [rerank] -> top_k."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from core.models import Collection
from core.offload import off_loop
from core.settings.retrieval import RetrievalConfig
from inference.client import ChatBackend
from retrieval.bm25 import BM25Retriever
from retrieval.dense import DenseRetriever
from retrieval.filters import SearchFilters
from retrieval.fusion import fuse
from retrieval.models import RetrievalModels
from retrieval.rerank import CrossEncoderReranker, LLMReranker, Reranker
from retrieval.transform import HyDE, MultiQuery
from retrieval.types import Hit


@dataclass
class ResultChunk:
    chunk_id: uuid.UUID
    document_id: uuid.UUID
    source_id: str
    title: str
    text: str
    page: int | None
    char_start: int
    char_end: int
    heading_path: list
    metadata: dict
    score: float
    scores: dict[str, float]
    ranks: dict[str, int]


@dataclass
class SearchResult:
    results: list[ResultChunk]
    debug: dict[str, Any] = field(default_factory=dict)
    timings_ms: dict[str, float] = field(default_factory=dict)  # per stage, and "total"


_HYDRATE_SQL = """
SELECT c.id, c.document_id, d.source_id, d.title, c.text, c.page, c.char_start, c.char_end,
       c.heading_path, c.metadata
FROM chunks c JOIN documents d ON d.id = c.document_id
WHERE c.id = ANY(CAST(:ids AS uuid[])) AND c.collection_id = :cid
"""


class SearchPipeline:
    """Runs one `RetrievalConfig` against a collection, with the process's `models` (query
    embedding, cross-encoder). `llm` (for query transforms and the LLM reranker) is only needed
    when the config asks for one (`RetrievalConfig.needs_llm`)."""

    def __init__(
        self, config: RetrievalConfig, models: RetrievalModels, *, llm: ChatBackend | None = None
    ) -> None:
        self.config = config
        self.models = models
        self.llm = llm

    def _reranker(self) -> tuple[Reranker | None, str]:
        cfg = self.config.rerank
        if not cfg.enabled:
            return None, "off"
        if cfg.kind == "cross-encoder":
            if not cfg.model:
                return None, "skipped: no rerank.model configured for the cross-encoder"
            model = self.models.cross_encoder(cfg.model)
            return CrossEncoderReranker(cfg, model), f"cross-encoder {cfg.model}"
        if self.llm is None:
            return None, "skipped: no LLM backend for the LLM reranker"
        return LLMReranker(cfg, self.llm), "llm"

    async def _queries(self, query: str, debug: dict) -> tuple[list[str], list[str]]:
        """(queries for BM25, texts whose mean vector is each dense query), per transform."""
        kind = self.config.transform.kind
        needs_dense = self.config.mode != "bm25"
        if kind == "none" or self.llm is None:
            if kind != "none":
                debug["transform"] = f"skipped: no LLM backend for {kind}"
            return [query], [query]
        if kind == "hyde":
            answer = await HyDE(self.config.transform, self.llm).run(query) if needs_dense else ""
            debug["hyde"] = answer
            return [query], ([query, answer] if answer else [query])
        queries = await MultiQuery(self.config.transform, self.llm).run(query)
        debug["queries"] = queries
        return queries, queries

    async def run(
        self,
        session: Session,
        collection: Collection,
        query: str,
        filters: SearchFilters | None = None,
        debug: bool = False,
    ) -> SearchResult:
        # NOTE: SQL and embedding run in worker threads (core/offload.py), one call at a time on
        # the caller's session: the event loop serves other requests meanwhile, and the session is
        # never used by two threads at once.
        cfg, info, timings = self.config, {}, {}
        t0 = time.perf_counter()
        queries, dense_texts = await self._queries(query, info)
        rankings: dict[str, list[Hit]] = {}
        multi = len(queries) > 1 and cfg.transform.kind == "multi_query"
        if cfg.mode in ("bm25", "hybrid"):
            t = time.perf_counter()
            bm25 = BM25Retriever(cfg.bm25)
            for i, q in enumerate(queries):
                key = f"bm25#{i}" if multi else "bm25"
                rankings[key] = await off_loop(bm25.run, session, collection.id, q, filters=filters)
            timings["bm25"] = _ms(t)
        if cfg.mode in ("dense", "hybrid"):
            t = time.perf_counter()
            vectors = await asyncio.to_thread(self.models.encode, collection.embedding_model, dense_texts)
            if not multi:  # HyDE: the query and its hypothetical answer, averaged
                mean = vectors.mean(axis=0)
                vectors = (mean / max(float(np.linalg.norm(mean)), 1e-12))[None, :]
            timings["embed"] = _ms(t)
            t = time.perf_counter()
            dense = DenseRetriever(cfg.dense)
            for i, vec in enumerate(vectors):
                key = f"dense#{i}" if multi else "dense"
                rankings[key] = await off_loop(
                    dense.run, session, collection.id, collection.index_dim, vec, filters=filters
                )
            timings["dense"] = _ms(t)
        fused = fuse(cfg.fusion, rankings, {"bm25": cfg.bm25.candidates, "dense": cfg.dense.candidates})
        reranker, info["rerank"] = self._reranker()
        pool = fused[: max(cfg.top_k, cfg.rerank.candidates)] if reranker else fused[: cfg.top_k]
        rows = await off_loop(_hydrate, session, collection.id, [h.chunk_id for h in pool])
        pool = [h for h in pool if h.chunk_id in rows]  # NOTE: a chunk deleted since its ranking is gone
        if reranker is not None:
            t = time.perf_counter()
            texts = {cid: row.text for cid, row in rows.items()}
            n = cfg.rerank.candidates  # the reranked head, then the rest in fused order
            pool = await reranker.run(query, pool[:n], texts) + pool[n:]
            timings["rerank"] = _ms(t)
        results = [_result(rows[h.chunk_id], h) for h in pool[: cfg.top_k]]
        timings["total"] = _ms(t0)
        if not debug:
            return SearchResult(results, timings_ms=timings)
        info["rankings"] = {
            name: [{"chunk_id": str(h.chunk_id), "score": h.scores[name.split("#")[0]]} for h in hits]
            for name, hits in rankings.items()
        }
        # Each stage's head side by side: the fused order before reranking, the reranked one after.
        info["fused"] = [{"chunk_id": str(h.chunk_id), "score": h.score} for h in fused[: cfg.top_k]]
        if reranker is not None:
            info["reranked"] = [{"chunk_id": str(r.chunk_id), "score": r.score} for r in results]
        heads = {h["chunk_id"] for r in [*info["rankings"].values(), info["fused"]] for h in r[: cfg.top_k]}
        labels = await off_loop(_hydrate, session, collection.id, [uuid.UUID(c) for c in heads])
        info["chunks"] = {str(cid): _label(row) for cid, row in labels.items()}
        info |= {"config": cfg.model_dump(), "timings_ms": timings}
        return SearchResult(results, info, timings)


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 2)


def _hydrate(session: Session, collection_id: uuid.UUID, ids: list[uuid.UUID]) -> dict[uuid.UUID, Any]:
    if not ids:
        return {}
    rows = session.execute(text(_HYDRATE_SQL), {"ids": [str(i) for i in ids], "cid": collection_id}).all()
    return {row.id: row for row in rows}


def _label(row: Any) -> dict[str, Any]:
    """What a ranking needs to show a chunk: where it comes from and how it begins."""
    return {
        "document_id": str(row.document_id),
        "source_id": row.source_id,
        "page": row.page,
        "char_start": row.char_start,
        "char_end": row.char_end,
        "snippet": row.text[:160],
    }


def _result(row: Any, hit: Hit) -> ResultChunk:
    return ResultChunk(
        chunk_id=row.id,
        document_id=row.document_id,
        source_id=row.source_id,
        title=row.title,
        text=row.text,
        page=row.page,
        char_start=row.char_start,
        char_end=row.char_end,
        heading_path=row.heading_path,
        metadata=row.metadata,
        score=hit.score,
        scores=dict(hit.scores),
        ranks=dict(hit.ranks),
    )
