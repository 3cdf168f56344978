"""/metrics exposes vLLM-style counters, histograms and engine gauges, and they move with traffic."""

from __future__ import annotations

import pytest

from inference.async_engine import AsyncLLMEngine
from inference.config import EngineConfig
from inference.server import create_app
from tests.inference.server.conftest import (
    MAX_MODEL_LEN,
    MODEL_NAME,
    SMOLLM2_GGUF,
    client_for,
    running,
    scrape,
)

pytestmark = pytest.mark.slow


def test_metrics_move_after_a_request(base_url, client):
    before = scrape(base_url)
    for gauge in (
        "groundwork:num_requests_running",
        "groundwork:num_requests_waiting",
        "groundwork:kv_cache_usage_perc",
        "groundwork:num_preemptions_total",
    ):
        assert gauge in before

    messages = [{"role": "user", "content": "Name a colour."}]
    reply = client.chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=5, temperature=0)
    after = scrape(base_url)

    def moved(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    assert moved("groundwork:prompt_tokens_total") == reply.usage.prompt_tokens
    assert moved("groundwork:generation_tokens_total") == reply.usage.completion_tokens
    reason = reply.choices[0].finish_reason
    assert moved(f"groundwork:request_success_total{{finished_reason={reason}}}") == 1
    for histogram in ("time_to_first_token_seconds", "e2e_request_latency_seconds"):
        assert moved(f"groundwork:{histogram}_count") == 1
        assert moved(f"groundwork:{histogram}_sum") > 0
    assert moved("groundwork:time_per_output_token_seconds_count") == (reply.usage.completion_tokens > 1)


def test_each_app_has_its_own_registry(engine):
    # Two servers in one process (as in tests) must not collide on metric names.
    first, second = create_app(engine, "a"), create_app(engine, "b")
    assert first.state.context.metrics.registry is not second.state.context.metrics.registry


def test_prefix_cache_counters_and_hit_rate(base_url, client):
    # Several 16-token blocks of prompt, so that the second identical request finds them cached.
    text = "Paged attention keeps keys and values in fixed-size blocks. " * 8
    messages = [{"role": "user", "content": f"{text}\nSummarise in one word."}]
    client.chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=1, temperature=0)
    before = scrape(base_url)
    reply = client.chat.completions.create(model=MODEL_NAME, messages=messages, max_tokens=1, temperature=0)
    after = scrape(base_url)
    queries = after["groundwork:prefix_cache_queries_total"] - before["groundwork:prefix_cache_queries_total"]
    hits = after["groundwork:prefix_cache_hits_total"] - before["groundwork:prefix_cache_hits_total"]
    assert 0 < queries <= reply.usage.prompt_tokens
    assert hits >= reply.usage.prompt_tokens - 16  # all but the last, partial or recomputed, block
    assert after["groundwork:prefix_cache_hit_rate"] == pytest.approx(
        after["groundwork:prefix_cache_hits_total"] / after["groundwork:prefix_cache_queries_total"]
    )


def test_speculative_decoding_counters_and_rates():
    config = EngineConfig(
        SMOLLM2_GGUF,
        max_num_seqs=2,
        max_model_len=MAX_MODEL_LEN,
        kv_cache_memory_gb=0.05,
        device="cpu",
        speculative="prompt_lookup",
    )
    engine = AsyncLLMEngine(config, MODEL_NAME)
    engine.start()
    try:
        with running(create_app(engine, MODEL_NAME)) as url:
            before = scrape(url)
            assert before["groundwork:spec_decode_acceptance_rate"] == 0
            assert before["groundwork:spec_decode_mean_accepted_length"] == 1
            # A copy task: prompt lookup finds the continuation in the prompt, as with RAG contexts.
            sentence = "The quick brown fox jumps over the lazy dog near the old stone bridge."
            messages = [{"role": "user", "content": f"Repeat this sentence exactly: {sentence}"}]
            client_for(url).chat.completions.create(
                model=MODEL_NAME, messages=messages, max_tokens=30, temperature=0
            )
            after = scrape(url)
    finally:
        engine.shutdown()
    drafts = after["groundwork:spec_decode_num_drafts_total"]
    proposed = after["groundwork:spec_decode_num_draft_tokens_total"]
    accepted = after["groundwork:spec_decode_num_accepted_tokens_total"]
    assert drafts > 0 and proposed >= drafts and 0 < accepted <= proposed
    assert after["groundwork:spec_decode_acceptance_rate"] == pytest.approx(accepted / proposed)
    assert after["groundwork:spec_decode_mean_accepted_length"] == pytest.approx(1 + accepted / drafts)
