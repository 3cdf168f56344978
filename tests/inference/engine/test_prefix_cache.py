"""Prefix caching: hits on shared prefixes, identical outputs, safe eviction, tenant isolation by salt."""

from __future__ import annotations

import hashlib
import random
from array import array
from dataclasses import replace

import pytest

from inference.engine import LLMEngine
from inference.protocol import RequestOutput, SamplingParams
from tests.inference.engine.tiny import save_tiny_model

GREEDY = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)


@pytest.fixture(scope="module")
def tiny_long(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny-long"), "llama", max_position_embeddings=2048)


def run(engine: LLMEngine, prompts: list[list[int]], params: list[SamplingParams]) -> list[RequestOutput]:
    """Final outputs (token ids accumulated) of requests added together, in order."""
    ids = [f"r{engine._arrivals + i}" for i in range(len(prompts))]
    for rid, prompt, p in zip(ids, prompts, params, strict=True):
        engine.add_request(rid, prompt, p)
    tokens: dict[str, list[int]] = {rid: [] for rid in ids}
    final: dict[str, RequestOutput] = {}
    while engine.has_unfinished():
        for out in engine.step():
            tokens[out.request_id].extend(out.new_token_ids)
            if out.finished:
                final[out.request_id] = replace(out, new_token_ids=tokens[out.request_id])
    return [final[rid] for rid in ids]


def rag_prompts(vocab: int, n: int, system_len: int = 1000, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    system = [rng.randrange(vocab) for _ in range(system_len)]
    return [system + [rng.randrange(vocab) for _ in range(rng.randint(5, 30))] for _ in range(n)]


@pytest.mark.unit
def test_shared_system_prompt_hits_the_cache(tiny_long, make_engine):
    cached = make_engine(tiny_long, kv_cache_memory_gb=0.05)
    ps = rag_prompts(cached.vocab_size, 20)
    first = run(cached, ps[:1], [GREEDY])
    rest = run(cached, ps[1:], [GREEDY] * 19)
    bs = cached.config.block_size
    assert first[0].num_cached_tokens == 0
    assert [o.num_cached_tokens for o in rest] == [1000 // bs * bs] * 19
    stats = cached.stats()
    assert stats.prefix_cache_queries_total == sum(len(p) for p in ps)
    assert stats.prefix_cache_hits_total == 19 * (1000 // bs * bs) == stats.num_cached_tokens_total

    plain = make_engine(tiny_long, kv_cache_memory_gb=0.05, enable_prefix_caching=False)
    expected = run(plain, ps, [GREEDY] * 20)
    assert [o.new_token_ids for o in first + rest] == [o.new_token_ids for o in expected]
    assert plain.stats().prefix_cache_hits_total == 0


@pytest.mark.unit
def test_requests_arriving_together_compute_their_shared_prompt_once(tiny_long, make_engine):
    """Eight requests with a 1,000-token system prompt, added at once: the first computes it (in chunks,
    over several steps) while the others wait for each chunk's blocks and then hit them, so only the
    first pays for the prefix; outputs as without the cache. Two other tenants' requests (salts) never
    wait for each other's blocks."""
    engine = make_engine(tiny_long, kv_cache_memory_gb=0.05)
    ps = rag_prompts(engine.vocab_size, 8)
    bs = engine.config.block_size
    outs = run(engine, ps, [GREEDY] * 8)
    assert [o.num_cached_tokens for o in outs] == [0] + [1000 // bs * bs] * 7
    plain = make_engine(tiny_long, kv_cache_memory_gb=0.05, enable_prefix_caching=False)
    assert [o.new_token_ids for o in outs] == [o.new_token_ids for o in run(plain, ps, [GREEDY] * 8)]

    fresh = make_engine(tiny_long, kv_cache_memory_gb=0.05)
    salted = [replace(GREEDY, cache_salt=tenant) for tenant in ("a", "b")]
    fresh.add_request("a", ps[0], salted[0])
    fresh.add_request("b", ps[1], salted[1])
    assert len(fresh.scheduler.schedule().seqs) == 2  # both admitted in the first step
    fresh.abort_all()


@pytest.mark.unit
def test_eviction_in_a_tiny_pool_never_corrupts_a_running_sequence(tiny_llama, make_engine):
    big = make_engine(tiny_llama, enable_prefix_caching=False)
    rng = random.Random(1)
    prefixes = [[rng.randrange(big.vocab_size) for _ in range(40)] for _ in range(3)]
    ps = [
        prefixes[i % 3] + [rng.randrange(big.vocab_size) for _ in range(rng.randint(1, 20))]
        for i in range(12)
    ]
    params = SamplingParams(max_tokens=30, temperature=0.0, ignore_eos=True)
    expected = [o.new_token_ids for o in run(big, ps, [params] * 12)]
    # 8 blocks of 16 tokens: two or three sequences fit, so cached prefixes are evicted and reused
    # while others run, and sequences are preempted and resumed from the cache.
    tiny = make_engine(tiny_llama, num_kv_blocks=8, block_size=16)
    assert [o.new_token_ids for o in run(tiny, ps, [params] * 12)] == expected
    stats = tiny.stats()
    assert stats.num_preemptions_total > 0 and stats.prefix_cache_hits_total > 0


@pytest.mark.unit
def test_cache_salts_isolate_tenants(tiny_llama, make_engine):
    engine = make_engine(tiny_llama)
    prompt = random.Random(2).choices(range(engine.vocab_size), k=70)

    def cached(salt: str | None) -> int:
        return run(engine, [prompt], [replace(GREEDY, cache_salt=salt)])[0].num_cached_tokens

    assert cached("tenant-a") == 0
    assert cached("tenant-b") == 0
    assert cached(None) == 0
    assert cached("tenant-a") == 64
    assert cached("tenant-b") == 64
    assert cached(None) == 64


@pytest.mark.unit
def test_block_keys_are_sha256_chains_over_parent_tokens_and_salt(tiny_llama, make_engine):
    engine = make_engine(tiny_llama, block_size=16)
    prompt = random.Random(4).choices(range(engine.vocab_size), k=40)
    engine.add_request("r", prompt, replace(GREEDY, cache_salt="t"))
    engine.step()
    seq = engine._seqs["r"]
    parent = hashlib.sha256(b"salt\0t").digest()
    for i, key in enumerate(seq.block_hashes):
        parent = hashlib.sha256(parent + array("q", prompt[16 * i : 16 * (i + 1)]).tobytes()).digest()
        assert key == parent
    assert len(seq.block_hashes) == 2
    while engine.has_unfinished():
        engine.step()


@pytest.mark.unit
def test_prefix_cache_counters_reach_the_metrics(tiny_llama, make_engine):
    from prometheus_client import generate_latest

    from inference.metrics import ServingMetrics

    engine = make_engine(tiny_llama)
    prompt = random.Random(3).choices(range(engine.vocab_size), k=40)
    run(engine, [prompt, prompt], [GREEDY, GREEDY])  # added together: the second waits a step, then hits
    run(engine, [prompt], [GREEDY])
    text = generate_latest(ServingMetrics(engine).registry).decode()
    assert "groundwork:prefix_cache_queries_total 120.0" in text
    assert "groundwork:prefix_cache_hits_total 64.0" in text
    assert "groundwork:spec_decode_num_drafts_total 0.0" in text
