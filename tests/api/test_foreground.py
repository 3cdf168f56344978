"""While an answer or a search retrieves, the in-process engine steps aside (api/foreground.py) for
tenants with nothing in it; an answer's own generation does not wait for its hold."""

from __future__ import annotations

import json
import threading
import time
import uuid

import httpx

from core.database import session_scope
from core.tenancy import create_api_key, get_or_create_tenant
from tests.api.qa_corpus import QUESTION
from tests.support.http import running

LONG = {
    "messages": [{"role": "user", "content": "Count from 1 to 300, separated by commas."}],
    "max_tokens": 400,
    "temperature": 0,
    "stream": True,
}


def _wait_idle(engine) -> None:
    deadline = time.monotonic() + 120
    while engine is not None and (stats := engine.stats()).num_running + stats.num_waiting:
        assert time.monotonic() < deadline, "the engine stayed busy"
        time.sleep(0.2)


def _searches_during_a_generation(http, state, chat_headers: dict, collection_id: str) -> float:
    """Three searches (no key: the default tenant) while a chat streams with `chat_headers`; how long
    the engine paused meanwhile."""
    gate = state.llm.foreground
    before = gate.paused_s
    plain = {**LONG, "model": state.settings.llm_model}  # the generator itself, no retrieval
    with http.stream("POST", "/v1/chat/completions", json=plain, headers=chat_headers) as chat:
        assert chat.status_code == 200, chat.read()
        lines = chat.iter_lines()
        first = next(line for line in lines if line.startswith("data: "))
        assert json.loads(first[6:])["choices"]  # generating now
        for _ in range(3):
            search = http.post(f"/v1/collections/{collection_id}/search", json={"query": QUESTION})
            assert search.status_code == 200
        still = state.llm.engine.stats().num_running
        paused = gate.paused_s - before
        assert any(line == "data: [DONE]" for line in lines)
    assert still == 1, "the generation ended before the searches: make it longer"
    return paused


def test_retrieval_pauses_the_engine_for_tenants_with_nothing_in_it(client, qa_collection, session_factory):
    """Another tenant's generation steps aside for the default tenant's searches; its own generation
    (an answer slot held) and its ask's own generation do not."""
    state = client.app.state.groundwork
    gate = state.llm.foreground
    with session_scope(session_factory) as session:
        _, plain = create_api_key(session, get_or_create_tenant(session, f"gen-{uuid.uuid4().hex[:6]}"), "ci")
    other = {"authorization": f"Bearer {plain}"}
    ask = {"collection": qa_collection, "question": QUESTION, "generation": {"max_tokens": 16}}
    with running(client.app) as base, httpx.Client(base_url=base, timeout=300) as http:
        _wait_idle(state.llm.engine)  # an earlier test's background run would pause for this ask
        before = gate.paused_s
        generated = http.post("/v1/ask", json={**ask, "answer_mode": "generate"})
        assert generated.status_code == 200 and generated.json()["answer"]
        assert gate.paused_s == before  # alone, its generation never waited for its own hold
        collection_id = http.get(f"/v1/collections/{qa_collection}").json()["id"]
        assert _searches_during_a_generation(http, state, other, collection_id) > 0
        assert _searches_during_a_generation(http, state, {}, collection_id) == 0
    assert gate._clear.is_set()  # nothing is held once every request ended


def test_a_busy_tenants_requests_wait_for_another_tenants_hold(client, qa_collection):
    """While the default tenant generates (an answer slot held), its other /v1 requests yield to a
    hold another tenant's retrieval takes (Foreground.yield_to_holds), at most a quarter second."""
    state = client.app.state.groundwork
    gate = state.llm.foreground
    plain = {**LONG, "model": state.settings.llm_model}
    with running(client.app) as base, httpx.Client(base_url=base, timeout=300) as http:
        _wait_idle(state.llm.engine)
        with http.stream("POST", "/v1/chat/completions", json=plain) as chat:
            assert chat.status_code == 200, chat.read()
            lines = chat.iter_lines()
            next(line for line in lines if line.startswith("data: "))  # generating: a slot held

            def timed_get() -> float:
                start = time.monotonic()
                assert http.get(f"/v1/collections/{qa_collection}").status_code == 200
                return time.monotonic() - start

            free = timed_get()
            hold = gate.take()  # another tenant's search, retrieving
            threading.Timer(0.15, hold.release).start()
            held = timed_get()
            assert any(line == "data: [DONE]" for line in lines)
    assert held >= 0.12 > free, (held, free)
