"""Settings of retrieval (see retrieval/README.md).

`RetrievalSettings` holds the platform-wide defaults of the search pipeline. A collection may
override any of them in its `retrieval` JSON (same shape, partial), and a search request may
override them again; the three are deep-merged in that order.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

SearchMode = Literal["bm25", "dense", "hybrid"]


class BM25Config(BaseModel):
    variant: Literal["lucene", "okapi"] = Field(
        default="lucene",
        description="lucene: idf = ln(1 + (N - n + 0.5)/(n + 0.5)) (Anserini's BEIR baseline); "
        "okapi: rank-bm25's BM25Okapi, idf = ln((N - n + 0.5)/(n + 0.5)) floored at epsilon * mean idf.",
    )
    k1: float | None = Field(
        default=None, ge=0, description="Term-frequency saturation (lucene 0.9, okapi 1.5)."
    )
    b: float | None = Field(
        default=None, ge=0, le=1, description="Length normalisation (lucene 0.4, okapi 0.75)."
    )
    epsilon: float = Field(
        default=0.25, ge=0, description="Okapi only: the idf floor, as a share of mean idf."
    )
    # NOTE: 100 with dense 100 x 4: `python -m benchmarks.fusion` (stop 20, alpha 0.8) scored convex
    # over 100 of each above convex with BM25 1,000 + dense 300 x 2 on both dev sets (NFCorpus 0.3765
    # vs 0.3727, DBpedia 0.4936 vs 0.4911 nDCG@10), with p99 25 ms instead of 228.
    candidates: int = Field(default=100, ge=1, le=10_000, description="Results BM25 hands to fusion/rerank.")

    @property
    def k1_value(self) -> float:
        return self.k1 if self.k1 is not None else (0.9 if self.variant == "lucene" else 1.5)

    @property
    def b_value(self) -> float:
        return self.b if self.b is not None else (0.4 if self.variant == "lucene" else 0.75)


class DenseConfig(BaseModel):
    # NOTE: 100 x 4 (400 HNSW rows re-scored exactly); see BM25Config.candidates for the measurement.
    candidates: int = Field(default=100, ge=1, le=10_000, description="Results dense search hands on.")
    overfetch: int = Field(
        default=4,
        ge=1,
        le=50,
        description="HNSW over the Matryoshka prefix returns candidates * overfetch rows, re-scored "
        "exactly with the full vector. Higher: better recall, slower.",
    )
    ef_search: int = Field(
        default=100,
        ge=1,
        le=1000,
        description="hnsw.ef_search floor; raised to the fetched row count, since pgvector 0.6 HNSW "
        "returns at most ef_search rows (before any WHERE filter).",
    )
    exact: bool = Field(
        default=False, description="Skip the index: exact cosine over every chunk (slow; for checking)."
    )


class FusionConfig(BaseModel):
    method: Literal["rrf", "convex"] = Field(
        default="convex",
        description="rrf: Reciprocal Rank Fusion of ranks; convex: alpha * dense + (1 - alpha) * bm25 over "
        "normalised scores (Bruch et al., 2023).",
    )
    # NOTE: 0.8. `python -m benchmarks.fusion` at 100 each ties 0.8 and 0.9 on the mean nDCG@10 of
    # the BEIR dev sets (0.4350 / 0.4354; 0.9 alone beats RRF over 1,000 on DBpedia), but with 0.9
    # NOTE: 0.85, the best mean nDCG@10 of the alphas at least as good as RRF over 1,000 each on both
    # dev sets (`python -m benchmarks.fusion`, stop 21: NFCorpus +0.017, DBpedia +0.011; 0.8 cleared
    # DBpedia by 0.003 in that run and missed it by up to 0.0025 in stop 20's). 0.9 cost long documents
    # answers (`python -m benchmarks.answers`: quote citation precision 75% -> 62%); 0.85 one question
    # of 24 (75% -> 71%).
    alpha: float = Field(
        default=0.85, ge=0, le=1, description="convex: the dense weight (bm25 gets 1 - alpha)."
    )
    normalization: Literal["minmax", "tm2c2"] = Field(
        default="tm2c2",
        description="convex: minmax maps each ranking's observed [min, max] to [0, 1]; tm2c2 uses the "
        "theoretical minimum (bm25 0, cosine -1) and the observed maximum.",
    )
    k: int = Field(
        default=60, ge=1, description="Reciprocal Rank Fusion constant: score = sum w / (k + rank)."
    )
    weights: dict[str, float] = Field(
        default_factory=lambda: {"bm25": 1.0, "dense": 1.0},
        description="Per-retriever weight in RRF (keys: bm25, dense); missing keys weigh 1.",
    )


class RerankConfig(BaseModel):
    enabled: bool = Field(default=False, description="Rerank the fused candidates.")
    kind: Literal["cross-encoder", "llm"] = Field(
        default="cross-encoder",
        description="cross-encoder: sentence-transformers CrossEncoder; llm: pointwise yes/no relevance "
        "logprobs from the inference engine (works offline with the packaged LLM).",
    )
    model: str | None = Field(
        default=None,
        description="Cross-encoder spec (registry name, local path or hub id). None with kind "
        "cross-encoder: reranking is skipped (reported in debug).",
    )
    candidates: int = Field(
        default=30, ge=1, le=1000, description="Top-N fused results given to the reranker."
    )
    batch_size: int = Field(default=16, ge=1, description="Pairs scored per forward pass.")
    max_chars: int = Field(default=1500, ge=100, description="Chunk text is cut to this many characters.")


class TransformConfig(BaseModel):
    kind: Literal["none", "hyde", "multi_query"] = Field(
        default="none",
        description="hyde: embed an LLM-written hypothetical answer; multi_query: LLM rewrites of the "
        "query, each searched, fused by RRF.",
    )
    num_queries: int = Field(default=3, ge=1, le=10, description="multi_query: rewrites to generate.")
    max_tokens: int = Field(default=128, ge=8, description="Generation budget of a rewrite/answer.")


class RetrievalConfig(BaseModel):
    """One search pipeline's configuration (serialisable; what a collection stores, partially)."""

    mode: SearchMode = Field(default="hybrid", description="bm25, dense or hybrid (both, RRF-fused).")
    top_k: int = Field(default=10, ge=1, le=1000, description="Results returned.")
    bm25: BM25Config = Field(default_factory=BM25Config)
    dense: DenseConfig = Field(default_factory=DenseConfig)
    fusion: FusionConfig = Field(default_factory=FusionConfig)
    rerank: RerankConfig = Field(default_factory=RerankConfig)
    transform: TransformConfig = Field(default_factory=TransformConfig)
    neighbors: int = Field(
        default=0,
        ge=0,
        le=4,
        description="Answers: each hit is given to the generator with this many chunks of its document "
        "on either side (long documents: the answer often sits just outside the matching chunk).",
    )
    sources_token_budget: int | None = Field(
        default=None,
        ge=100,
        le=100_000,
        description="Answers: generator tokens the sources may take (None: qa.sources_token_budget).",
    )

    @property
    def needs_llm(self) -> bool:
        """A query transform or the LLM reranker: the search calls an LLM."""
        return self.transform.kind != "none" or (self.rerank.enabled and self.rerank.kind == "llm")


class RetrievalSettings(RetrievalConfig):
    """Platform defaults. NOTE: the BM25 text-search configuration (stemming, stop words) is an
    index-time property of each collection, `retrieval.bm25.text_config` in its JSON (english,
    simple, groundwork_english_nostop, groundwork_simple_stop; default english); changing it
    needs `SELECT groundwork_bm25_reindex(<collection id>)`.
    """

    llm_base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible server for the LLM reranker and query transforms. Unset: the "
        "platform's generator (for answers, the first model of qa.cascade).",
    )
    llm_model: str | None = Field(default=None, description="Model name sent to that server.")
    llm_api_key: str | None = Field(default=None, description="Bearer key for that server.")
