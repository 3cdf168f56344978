"""A non-streamed chat whose client left stops generating: the engine request is aborted and the
answer slot freed at once, not when the whole answer is made (the packaged SmolLM2, real socket)."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.support.http import running

pytestmark = pytest.mark.integration


def test_a_non_streamed_chat_whose_client_left_is_aborted(client):
    state = client.app.state.groundwork
    engine = state.llm.local_engine()
    body = {
        "model": state.llm.backend().model_name,
        "messages": [{"role": "user", "content": "Write a very long story about a river."}],
        "max_tokens": 4000,
        "temperature": 1.0,
        "seed": 1,
    }
    with running(client.app) as base, httpx.Client(base_url=base, timeout=3) as http:
        with pytest.raises(httpx.ReadTimeout):
            http.post("/v1/chat/completions", json=body)  # the client gives up after 3 s
        deadline = time.monotonic() + 10
        while engine.stats().num_running and time.monotonic() < deadline:
            time.sleep(0.1)
        left = time.monotonic()
    assert engine.stats().num_running == 0, "the engine kept generating for a gone client"
    slots = state.answer_slots
    assert slots is None or not slots.running
    print(f"generation stopped {10 - (deadline - left):.1f} s after the client left")
