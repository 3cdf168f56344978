"""Greedy outputs do not depend on batching, chunking, preemption or the prefix cache."""

from __future__ import annotations

import random

import pytest

from inference.protocol import SamplingParams

GREEDY = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)


def prompts(n: int, vocab: int, seed: int = 0, lo: int = 3, hi: int = 90) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(rng.randint(lo, hi))] for _ in range(n)]


def tokens_of(results) -> list[list[int]]:
    return [tokens for tokens, _, _ in results]


@pytest.fixture(scope="module")
def reference(tiny_llama):
    """Each prompt generated alone, in its own fresh engine run."""
    from inference.config import EngineConfig
    from inference.engine import LLMEngine

    engine = LLMEngine(
        EngineConfig(tiny_llama, device="cpu", kv_cache_memory_gb=0.01, enable_prefix_caching=False)
    )
    ps = prompts(16, engine.vocab_size)
    return ps, [tokens_of(engine.generate([p], GREEDY))[0] for p in ps]


@pytest.mark.unit
def test_batch_of_16_equals_one_at_a_time(tiny_llama, make_engine, reference):
    ps, expected = reference
    engine = make_engine(tiny_llama, enable_prefix_caching=False)
    assert tokens_of(engine.generate(ps, GREEDY)) == expected


@pytest.mark.unit
def test_chunked_prefill_equals_unchunked(tiny_llama, make_engine, reference):
    ps, expected = reference
    engine = make_engine(
        tiny_llama, prefill_chunk_size=8, max_num_batched_tokens=20, enable_prefix_caching=False
    )
    assert tokens_of(engine.generate(ps, GREEDY)) == expected


@pytest.mark.unit
def test_forced_preemption_gives_the_same_outputs(tiny_llama, make_engine, reference):
    ps, expected = reference
    # 10 blocks of 16 tokens: room for about two requests at once, so the scheduler must preempt.
    engine = make_engine(tiny_llama, num_kv_blocks=10, block_size=16)
    assert engine.max_model_len == 160
    assert tokens_of(engine.generate(ps, GREEDY)) == expected
    assert engine.stats().num_preemptions_total > 0


@pytest.mark.unit
def test_prefix_cache_hits_and_gives_the_same_outputs(tiny_llama, make_engine, reference):
    ps, expected = reference
    engine = make_engine(tiny_llama, block_size=4)
    shared = ps[0][:40]
    first = engine.generate([shared + [1, 2, 3]], GREEDY)
    assert engine.stats().num_cached_tokens_total == 0
    engine.add_request("again", shared + [1, 2, 3], GREEDY)
    outs = []
    while engine.has_unfinished():
        outs += engine.step()
    assert [t for o in outs for t in o.new_token_ids] == first[0][0]
    assert outs[-1].num_cached_tokens == 40  # whole 4-token blocks of the prompt, minus the last token's
    assert tokens_of(engine.generate(ps, GREEDY)) == expected


@pytest.mark.unit
def test_mixed_lengths_and_budgets_never_exceed_limits(tiny_llama, make_engine):
    engine = make_engine(tiny_llama, max_num_seqs=3, max_num_batched_tokens=16, prefill_chunk_size=6)
    for i, p in enumerate(prompts(8, engine.vocab_size, seed=3)):
        engine.add_request(str(i), p, SamplingParams(max_tokens=5, temperature=0.0, ignore_eos=True))
    while engine.has_unfinished():
        batch = engine.scheduler.schedule()
        assert batch is not None
        assert batch.num_tokens <= 16 and len(batch.seqs) <= 3
        assert all(n <= 6 for n in batch.num_new_tokens)
        engine._run(batch)


@pytest.mark.slow
def test_smollm2_batch_equals_single(smollm2_engine):
    tok = smollm2_engine.tokenizer
    questions = ["What is the capital of France?", "Name three colours.", "Count from one to five."]
    ps = [
        tok.encode(
            tok.apply_chat_template(
                [{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True
            )
        )
        for q in questions
    ]
    params = SamplingParams(max_tokens=16, temperature=0.0)
    alone = [smollm2_engine.generate([p], params)[0] for p in ps]
    together = smollm2_engine.generate(ps, params)
    assert together == alone
    assert "Paris" in alone[0][1]
    smollm2_engine.block_manager.check_all_free()


@pytest.mark.slow
def test_smollm2_preemption_and_chunking_keep_outputs(smollm2_engine, smollm2_path, model_cache, make_engine):
    tok = smollm2_engine.tokenizer
    ps = [
        tok.encode(
            tok.apply_chat_template(
                [{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True
            )
        )
        for q in ["Tell me about the sea.", "Why is the sky blue?", "Give me a recipe for bread.", "Hello!"]
    ]
    greedy = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
    seeded = SamplingParams(max_tokens=24, temperature=0.9, top_p=0.9, seed=7, ignore_eos=True)
    expected = [smollm2_engine.generate([p], greedy)[0] for p in ps] + [
        smollm2_engine.generate([ps[0]], seeded)[0]
    ]
    tight = make_engine(
        smollm2_path, cache_dir=model_cache, num_kv_blocks=12, prefill_chunk_size=16, gguf_quantized=False
    )
    assert tight.generate([*ps, ps[0]], [greedy] * 4 + [seeded]) == expected
    assert tight.stats().num_preemptions_total > 0


@pytest.mark.unit
def test_a_tenant_that_queued_many_sequences_does_not_delay_another_tenants():
    from inference.block_manager import BlockManager
    from inference.scheduler import Scheduler
    from inference.sequence import Sequence

    scheduler = Scheduler(
        BlockManager(64, 16), max_num_seqs=2, max_num_batched_tokens=64, prefill_chunk_size=64
    )

    def seq(name: str, tenant: str) -> Sequence:
        params = SamplingParams(max_tokens=4, cache_salt=tenant)
        return Sequence(name, [1, 2, 3], 3, params, max_len=64)

    for i in range(10):
        scheduler.add(seq(f"d{i}", "tenant-d"))
    late = seq("b0", "tenant-b")
    scheduler.add(late)
    first = scheduler.schedule()
    assert [s.request_id for s in first.seqs] == ["d0", "b0"]  # not behind d1..d9
    # one tenant alone: first come, first served
    scheduler.finish(late, "abort")
    scheduler.finish(first.seqs[0], "abort")
    assert [s.request_id for s in scheduler.schedule().seqs] == ["d1", "d2"]
