"""The remote-backend path: the platform generates through an OpenAI-compatible server over real
HTTP (here our own `groundwork engine serve` app), as it would with vLLM or SGLang."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from core.registry import resolve_model
from inference.async_engine import AsyncLLMEngine
from inference.server import create_app as create_engine_app
from tests.api.qa_corpus import QUESTION
from tests.support.http import running

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def remote_url(settings):
    model_path = resolve_model(settings.llm_model).path
    engine = AsyncLLMEngine.from_settings(settings, model_path, settings.llm_model)
    engine.start()
    try:
        with running(create_engine_app(engine, settings.llm_model)) as url:
            yield f"{url}/v1"
    finally:
        engine.shutdown()


def test_ask_through_a_remote_openai_compatible_server(broker_settings, remote_url, qa_collection):
    remote = broker_settings.model_copy(
        update={"engine": broker_settings.engine.model_copy(update={"llm_base_url": remote_url})}
    )
    with TestClient(create_app(remote)) as client:
        body = client.post("/v1/ask", json={"collection": qa_collection, "question": QUESTION}).json()
        assert client.app.state.groundwork.llm.engine is None  # nothing generated in-process
    assert "12 March 2026" in body["answer"]
    assert body["citations"] and body["citations"][0]["source_id"] == "zephyr-release.txt"
    assert body["usage"]["completion_tokens"] > 0 and body["usage"]["prompt_tokens"] > 0
