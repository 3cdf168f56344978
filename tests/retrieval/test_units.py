"""Pure logic checked against hand-computed values: RRF, config merging, LLM parsing (the IR metrics:
tests/evals/test_metrics.py)."""

from __future__ import annotations

import math
import uuid

import pytest

from core.settings.retrieval import FusionConfig, RetrievalSettings
from retrieval.config import resolve_config
from retrieval.fusion import RRFFusion
from retrieval.rerank import verdict_logprobs
from retrieval.transform import parse_rewrites
from retrieval.types import ranked

pytestmark = pytest.mark.unit


def test_rrf_by_hand_with_weights_and_debug_ranks():
    a, b, c = (uuid.UUID(int=i) for i in (1, 2, 3))
    bm25 = ranked("bm25", [(a, 9.0), (b, 5.0)])
    dense = ranked("dense", [(b, 0.9), (c, 0.8)])
    fused = RRFFusion(FusionConfig(k=60, weights={"bm25": 2.0})).run({"bm25": bm25, "dense": dense})
    scores = {h.chunk_id: h.score for h in fused}
    assert scores[a] == pytest.approx(2 / 61)
    assert scores[b] == pytest.approx(2 / 62 + 1 / 61)
    assert scores[c] == pytest.approx(1 / 62)
    assert [h.chunk_id for h in fused] == [b, a, c]
    assert fused[0].ranks == {"bm25": 2, "dense": 1, "rrf": 1}
    assert fused[0].scores["bm25"] == 5.0 and fused[0].scores["dense"] == 0.9


def test_config_merges_defaults_collection_and_request():
    cfg = resolve_config(
        RetrievalSettings(),
        {"mode": "dense", "bm25": {"variant": "okapi", "text_config": "simple"}, "rerank": {"model": "x"}},
        {"mode": "hybrid", "rerank": {"enabled": True}, "fusion": {"weights": {"dense": 3}}},
    )
    assert cfg.mode == "hybrid" and cfg.bm25.variant == "okapi"
    assert (cfg.bm25.k1_value, cfg.bm25.b_value) == (1.5, 0.75)
    assert cfg.rerank.enabled and cfg.rerank.model == "x"
    assert cfg.fusion.weights == {"dense": 3.0}  # weights are replaced, not merged
    assert resolve_config(RetrievalSettings()).bm25.k1_value == 0.9


def test_verdict_logprobs_merges_spellings():
    yes, no = verdict_logprobs({"Yes": math.log(0.3), " yes": math.log(0.2), "No": math.log(0.1), "The": -1})
    assert yes == pytest.approx(math.log(0.5)) and no == pytest.approx(math.log(0.1))
    assert verdict_logprobs({"Maybe": -0.1})[0] < -20  # absent verdicts rank below any present one


def test_parse_rewrites_cleans_and_dedupes():
    raw = (
        "1. cheap flights to Paris\n- Cheap flights to Paris\n* budget airfare Paris\n\nflights paris\nextra"
    )
    assert parse_rewrites(raw, "flights Paris", 3) == [
        "cheap flights to Paris",
        "budget airfare Paris",
        "extra",
    ]
    assert parse_rewrites(raw, "flights Paris", 1) == ["cheap flights to Paris"]


def test_retrieval_llm_choice():
    from core.settings import Settings
    from core.settings.retrieval import RerankConfig, RetrievalConfig, TransformConfig
    from inference.client import RemoteChatBackend
    from inference.provider import LLMProvider

    generator = type("Backend", (), {"model_name": "m"})()
    plain = LLMProvider(Settings(database_url="postgresql://x/y"))
    chat = plain.retrieval_backend("tenant-a", generator=generator)
    assert chat.backend is generator and chat.salt == "tenant-a"  # the caller's model, salted
    assert plain.retrieval_backend(generator=generator) is generator
    retrieval = {"llm_base_url": "http://h:1/v1", "llm_model": "r"}
    remote = LLMProvider(Settings(database_url="postgresql://x/y", retrieval=retrieval))
    chat = remote.retrieval_backend("tenant-a", generator=generator)
    assert isinstance(chat.backend, RemoteChatBackend) and chat.salt == "tenant-a"
    assert (chat.backend.base_url, chat.model_name) == ("http://h:1/v1", "r")
    assert remote.retrieval_backend("tenant-b").backend is chat.backend  # one client per process
    hyde = RetrievalConfig(transform=TransformConfig(kind="hyde"))
    llm_rerank = RetrievalConfig(rerank=RerankConfig(enabled=True, kind="llm"))
    ce_rerank = RetrievalConfig(rerank=RerankConfig(enabled=True, kind="cross-encoder"))
    assert hyde.needs_llm and llm_rerank.needs_llm
    assert not RetrievalConfig().needs_llm and not ce_rerank.needs_llm
