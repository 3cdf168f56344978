"""/metrics exposes vLLM-style counters, histograms and engine gauges, and they move with traffic."""

from __future__ import annotations

import pytest

from inference.server import create_app
from tests.inference.server.conftest import MODEL_NAME, scrape

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
