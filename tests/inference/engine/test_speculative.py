"""Speculative decoding through the engine: greedy outputs equal plain decoding, exactly."""

from __future__ import annotations

import random

import pytest

from inference.grammar import parse_structured_output
from inference.protocol import SamplingParams

GREEDY = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
# Speculation in steps of any size (the defaults switch it off above 4 running sequences, and on CPU
# above 8 tokens per step), so that these tests verify many sequences' guesses at once.
ANY_BATCH = {"spec_max_batch": 64, "spec_max_tokens": 4096}


def repetitive_prompts(n: int, vocab: int, seed: int = 0) -> list[list[int]]:
    """Prompts that repeat a phrase, so prompt lookup finds matches."""
    rng = random.Random(seed)
    prompts = []
    for _ in range(n):
        phrase = [rng.randrange(vocab) for _ in range(rng.randint(3, 10))]
        prompts.append([rng.randrange(vocab) for _ in range(rng.randint(0, 5))] + phrase * rng.randint(2, 5))
    return prompts


def tokens_of(results) -> list[list[int]]:
    return [tokens for tokens, _, _ in results]


@pytest.fixture(scope="module")
def plain_outputs(tiny_llama):
    from inference.config import EngineConfig
    from inference.engine import LLMEngine

    engine = LLMEngine(EngineConfig(tiny_llama, device="cpu", kv_cache_memory_gb=0.01))
    ps = repetitive_prompts(50, engine.vocab_size)
    return ps, tokens_of(engine.generate(ps, GREEDY))


@pytest.mark.unit
def test_prompt_lookup_greedy_equals_plain_decoding(tiny_llama, make_engine, plain_outputs):
    ps, expected = plain_outputs
    # spec_max_batch 8 < 50: the first steps run plain, speculation starts as requests finish. The
    # random model's outputs seldom repeat 2-grams of the prompt: single tokens are matched too.
    engine = make_engine(
        tiny_llama,
        speculative="prompt_lookup",
        prompt_lookup_min=1,
        spec_max_batch=8,
        spec_max_tokens=4096,
        max_num_seqs=16,
    )
    assert tokens_of(engine.generate(ps, GREEDY)) == expected
    # Random weights seldom continue the repeated phrase: guesses are verified, few or none kept (the
    # SmolLM2 test below and the draft tests cover accepted guesses).
    assert engine.stats().spec_proposed_tokens_total > 0


@pytest.mark.unit
def test_draft_model_greedy_equals_plain_decoding(tiny_llama, tiny_qwen2, make_engine, plain_outputs):
    ps, expected = plain_outputs
    engine = make_engine(tiny_llama, speculative="draft", draft_model_path=tiny_qwen2, **ANY_BATCH)
    assert tokens_of(engine.generate(ps, GREEDY)) == expected
    assert engine.stats().spec_proposed_tokens_total > 0


@pytest.mark.unit
def test_the_target_as_its_own_draft_is_always_accepted(tiny_llama, make_engine, plain_outputs):
    ps, expected = plain_outputs
    engine = make_engine(
        tiny_llama,
        speculative="draft",
        draft_model_path=tiny_llama,
        num_speculative_tokens=5,
        **ANY_BATCH,
    )
    # Tiny pool: proposals that do not fit are dropped, sequences are preempted and resumed.
    small = make_engine(
        tiny_llama,
        speculative="draft",
        draft_model_path=tiny_llama,
        num_kv_blocks=6,
        **ANY_BATCH,
    )
    for eng in (engine, small):
        assert tokens_of(eng.generate(ps[:12], GREEDY)) == expected[:12]
        stats = eng.stats()
        assert stats.spec_proposed_tokens_total > 0
        assert stats.spec_accepted_tokens_total == stats.spec_proposed_tokens_total
    assert engine.stats().spec_mean_accepted_length > 3
    assert small.stats().num_preemptions_total > 0


@pytest.mark.unit
def test_sampled_requests_accept_everything_from_an_identical_draft(tiny_llama, make_engine):
    engine = make_engine(tiny_llama, speculative="draft", draft_model_path=tiny_llama)
    ps = repetitive_prompts(4, engine.vocab_size, seed=1)
    params = SamplingParams(max_tokens=40, temperature=0.8, top_p=0.9, ignore_eos=True, logprobs=1)
    for tokens, _, reason in engine.generate(ps, params):
        assert len(tokens) == 40 and reason == "length"
    stats = engine.stats()
    # p == q (same model, same parameters) up to rounding: min(1, p / q) is 1.
    assert stats.spec_proposed_tokens_total > 50
    assert stats.spec_acceptance_rate > 0.97


@pytest.mark.unit
def test_speculation_is_off_above_spec_max_batch_and_per_request(tiny_llama, make_engine, plain_outputs):
    ps, expected = plain_outputs
    engine = make_engine(tiny_llama, speculative="prompt_lookup", spec_max_batch=2)
    assert tokens_of(engine.generate(ps[:3], GREEDY)) == expected[:3]
    assert engine.stats().spec_num_drafts_total == 0
    off = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True, num_speculative_tokens=0)
    assert tokens_of(engine.generate(ps[:1], off)) == expected[:1]
    assert engine.stats().spec_num_drafts_total == 0


@pytest.mark.unit
def test_blocks_committed_while_speculating_hold_only_verified_tokens(tiny_llama, make_engine, plain_outputs):
    """Prompts extended by earlier outputs hit blocks the speculating requests registered."""
    ps, expected = plain_outputs
    engine = make_engine(tiny_llama, speculative="draft", draft_model_path=tiny_llama, **ANY_BATCH)
    engine.generate(ps[:10], GREEDY)
    longer = [p + out[:20] for p, out in zip(ps[:10], expected[:10], strict=True)]
    reference = make_engine(tiny_llama, enable_prefix_caching=False)
    hits_before = engine.stats().prefix_cache_hits_total
    assert tokens_of(engine.generate(longer, GREEDY)) == tokens_of(reference.generate(longer, GREEDY))
    assert engine.stats().prefix_cache_hits_total > hits_before


@pytest.mark.unit
def test_grammar_cuts_proposals_and_outputs_are_unchanged(tiny_llama, make_engine):
    spec = parse_structured_output({"response_format": {"type": "json_object"}})
    params = SamplingParams(max_tokens=40, temperature=0.0, structured_output=spec)
    plain = make_engine(tiny_llama)
    ps = repetitive_prompts(4, plain.vocab_size, seed=2)
    expected = plain.generate(ps, params)
    engine = make_engine(tiny_llama, speculative="draft", draft_model_path=tiny_llama)
    assert engine.generate(ps, params) == expected
    stats = engine.stats()
    # The draft proposes unconstrained tokens: the grammar rejects some, the rest are accepted.
    assert stats.spec_accepted_tokens_total > 0


@pytest.mark.unit
def test_a_failing_proposer_only_turns_speculation_off(tiny_llama, make_engine, plain_outputs, monkeypatch):
    ps, expected = plain_outputs
    engine = make_engine(tiny_llama, speculative="prompt_lookup")

    def broken(seq, k):
        raise RuntimeError("proposer bug")

    monkeypatch.setattr(engine.spec.proposer, "propose", broken)
    assert tokens_of(engine.generate(ps[:2], GREEDY)) == expected[:2]
    assert engine.stats().spec_num_drafts_total == 0


RAG_CONTEXT = (
    "Groundwork stores documents in chunks of about 400 tokens. Each chunk is embedded with "
    "all-MiniLM-L6-v2 and indexed for hybrid search. The engine uses paged attention with blocks "
    "of 16 tokens and a prefix cache keyed by chained block hashes."
)


@pytest.mark.slow
def test_smollm2_prompt_lookup_quotes_faster_with_the_same_output(smollm2_engine, smollm2_path, model_cache):
    from inference.config import EngineConfig
    from inference.engine import LLMEngine

    messages = [
        {"role": "system", "content": f"Answer by quoting the context exactly.\n\nContext: {RAG_CONTEXT}"},
        {"role": "user", "content": "Repeat the context word for word."},
    ]
    prompt = smollm2_engine.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    prompt = list(getattr(prompt, "input_ids", prompt))
    params = SamplingParams(max_tokens=48, temperature=0.0)
    expected = smollm2_engine.generate([prompt], params)
    hits = smollm2_engine.stats().prefix_cache_hits_total
    assert smollm2_engine.generate([prompt], params) == expected  # now from the prefix cache
    assert smollm2_engine.stats().prefix_cache_hits_total - hits >= len(prompt) // 16 * 16 - 16

    engine = LLMEngine(
        EngineConfig(
            smollm2_path,
            device="cpu",
            cache_dir=model_cache,
            speculative="prompt_lookup",
            gguf_quantized=False,
        )
    )
    assert engine.generate([prompt], params) == expected
    stats = engine.stats()
    assert stats.spec_accepted_tokens_total > 24, stats
    engine.block_manager.check_all_free()


@pytest.mark.unit
def test_a_speculating_step_feeds_at_most_spec_max_tokens(tiny_llama, make_engine, plain_outputs):
    ps, expected = plain_outputs
    engine = make_engine(
        tiny_llama, speculative="prompt_lookup", prompt_lookup_min=1, spec_max_batch=64, spec_max_tokens=8
    )
    fed: list[tuple[int, int]] = []  # (running sequences, tokens they feed) of each speculating step
    propose = engine.spec.propose

    def recording(running, grammars):
        proposals = propose(running, grammars)
        guesses = sum(len(p.token_ids) for p in proposals.values())
        if guesses:
            fed.append((len(running), len(running) + guesses))
        return proposals

    engine.spec.propose = recording
    lengths = [4, 8, 12, 16, 24]  # requests finish one by one, leaving each a larger share
    outputs: dict[str, list[int]] = {str(i): [] for i in range(5)}
    for i, n in enumerate(lengths):
        engine.add_request(str(i), ps[i], SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True))
    while engine.has_unfinished():
        for out in engine.step():
            outputs[out.request_id] += out.new_token_ids
    assert [outputs[str(i)] for i in range(5)] == [expected[i][:n] for i, n in enumerate(lengths)]
    assert fed and all(tokens <= 8 for _, tokens in fed)
    assert all(running <= 4 for running, _ in fed)  # 8 // 5 - 1 = 0 guesses while all five run
    assert any(tokens - running > 1 for running, tokens in fed)  # fewer sequences, longer guesses


@pytest.mark.unit
def test_requests_back_off_after_passes_that_keep_no_guess(tiny_llama, make_engine, plain_outputs):
    ps, expected = plain_outputs
    engine = make_engine(tiny_llama, speculative="prompt_lookup", prompt_lookup_min=1)
    guessed: list[bool] = []  # per decode step of the one request: did it verify guesses?
    misses: list[int] = []  # indexes into `guessed` of passes that kept nothing
    propose, verify = engine.spec.propose, engine.spec.verify

    def recording_propose(running, grammars):
        proposals = propose(running, grammars)
        guessed.append(bool(proposals))
        return proposals

    def recording_verify(seq, logits, grammars, stop, picks=None):
        result = verify(seq, logits, grammars, stop, picks)
        if len(result.tokens) == 1:
            misses.append(len(guessed) - 1)
        return result

    engine.spec.propose, engine.spec.verify = recording_propose, recording_verify
    long = SamplingParams(max_tokens=48, temperature=0.0, ignore_eos=True)
    tokens, _, _ = engine.generate([ps[0] * 3], long)[0]
    assert misses, "the random model should reject some guesses"
    # After a miss the next step proposes nothing; after two in a row, the next two steps.
    for i in misses:
        if i + 1 < len(guessed):
            assert not guessed[i + 1]
    in_a_row = [
        second
        for first, second in zip(misses, misses[1:], strict=False)
        if not any(guessed[first + 1 : second])
    ]
    assert in_a_row, "the random model should reject guesses twice in a row"
    for second in in_a_row:
        assert not any(guessed[second + 1 : second + 3])


@pytest.mark.unit
def test_greedy_verification_is_batched_across_sequences(tiny_llama, make_engine, plain_outputs, monkeypatch):
    """Plain greedy sequences verify with one batched argmax per step (no per-position sampler call);
    a request asking for logprobs still goes position by position. Outputs stay those of plain decoding."""
    import inference.spec.decoding as decoding

    calls: list[int] = []
    per_position = decoding.verify_token
    monkeypatch.setattr(decoding, "verify_token", lambda *a: calls.append(1) or per_position(*a))
    ps, expected = plain_outputs
    engine = make_engine(tiny_llama, speculative="prompt_lookup", prompt_lookup_min=1, **ANY_BATCH)
    assert tokens_of(engine.generate(ps[:8], GREEDY)) == expected[:8]
    assert engine.stats().spec_num_drafts_total > 0 and not calls
    with_logprobs = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True, logprobs=1)
    assert tokens_of(engine.generate(ps[:2], with_logprobs)) == expected[:2]
    assert calls
