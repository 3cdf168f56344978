"""The generator loads on the first answer that needs it (seconds for the packaged model, minutes for
a 1.5B GGUF converted on first use): meanwhile the API must go on serving everyone else."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from fastapi.testclient import TestClient

import inference.provider as provider
from api.main import create_app
from tests.api.qa_corpus import QUESTION


def test_the_first_answer_loads_the_generator_off_the_event_loop(broker_settings, qa_collection, monkeypatch):
    loading, release = threading.Event(), threading.Event()
    real = provider.start_local_engine

    def held_load(*args, **kwargs):
        loading.set()
        release.wait(120)
        return real(*args, **kwargs)

    monkeypatch.setattr(provider, "start_local_engine", held_load)
    with TestClient(create_app(broker_settings)) as client, ThreadPoolExecutor(2) as pool:
        body = {"collection": qa_collection, "question": QUESTION}
        asked = pool.submit(client.post, "/v1/ask", json=body)
        try:
            assert loading.wait(60)
            # With the load on the event loop this waits until the load ends: here, never.
            health = pool.submit(client.get, "/healthz").result(timeout=20)
            assert health.status_code == 200
        finally:
            release.set()
        assert asked.result(timeout=300).status_code == 200
