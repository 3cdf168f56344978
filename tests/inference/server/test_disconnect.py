"""A client that goes away stops its generation: nothing keeps running in the engine afterwards."""

from __future__ import annotations

import httpx
import pytest

from tests.inference.server.conftest import MAX_MODEL_LEN, MODEL_NAME, scrape, wait_until_idle

pytestmark = pytest.mark.slow

# Long enough that finishing it would take far longer than the abort deadline below.
LONG = {
    "model": MODEL_NAME,
    "messages": [{"role": "user", "content": "Write a long story about a dragon."}],
    "max_tokens": MAX_MODEL_LEN - 64,
    "temperature": 0,
}
ABORT_DEADLINE_S = 5.0


ABORTED = "groundwork:request_success_total{finished_reason=abort}"


def test_disconnect_mid_stream_aborts_the_request(base_url, engine):
    wait_until_idle(engine)
    aborted_before = scrape(base_url).get(ABORTED, 0)
    body = {**LONG, "stream": True}
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=body, timeout=60) as response:
        assert response.status_code == 200
        events = (line for line in response.iter_lines() if line.startswith("data:"))
        assert [next(events) for _ in range(3)]
        assert engine.stats().num_running == 1
    assert wait_until_idle(engine, ABORT_DEADLINE_S) < ABORT_DEADLINE_S
    assert scrape(base_url)[ABORTED] == aborted_before + 1


def test_disconnect_while_waiting_for_a_plain_response_aborts_the_request(base_url, engine):
    wait_until_idle(engine)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{base_url}/v1/chat/completions", json=LONG, timeout=httpx.Timeout(60, read=1.0))
    assert wait_until_idle(engine, ABORT_DEADLINE_S) < ABORT_DEADLINE_S
