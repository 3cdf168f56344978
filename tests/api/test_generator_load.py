"""The generator loads on the first call that needs it (an answer; a search with a query transform):
seconds for the packaged model, minutes for a 1.5B GGUF converted on first use. Meanwhile the API
must go on serving everyone else."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient

import inference.provider as provider
from api.main import create_app
from tests.api.qa_corpus import QUESTION


@pytest.mark.parametrize("first", ["ask", "hyde search"])
def test_the_first_call_loads_the_generator_off_the_event_loop(
    first, broker_settings, qa_collection, monkeypatch
):
    loading, release = threading.Event(), threading.Event()
    real = provider.start_local_engine

    def held_load(*args, **kwargs):
        loading.set()
        release.wait(120)
        return real(*args, **kwargs)

    monkeypatch.setattr(provider, "start_local_engine", held_load)
    with TestClient(create_app(broker_settings)) as client, ThreadPoolExecutor(2) as pool:
        if first == "ask":
            route, body = "/v1/ask", {"collection": qa_collection, "question": QUESTION}
        else:  # a query transform calls the generator
            collection_id = client.get(f"/v1/collections/{qa_collection}").json()["id"]
            route, body = f"/v1/collections/{collection_id}/search", {"query": QUESTION, "transform": "hyde"}
        asked = pool.submit(client.post, route, json=body)
        try:
            assert loading.wait(60)
            # With the load on the event loop this waits until the load ends: here, never.
            health = pool.submit(client.get, "/healthz").result(timeout=20)
            assert health.status_code == 200
        finally:
            release.set()
        response = asked.result(timeout=300)
        assert response.status_code == 200, response.text
