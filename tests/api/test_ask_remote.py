"""The remote-backend path: the platform generates through an OpenAI-compatible server over real
HTTP (here our own `groundwork engine serve` app), as it would with vLLM or SGLang."""

from __future__ import annotations

import httpx
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


def _served(base_url: str) -> float:
    """Requests the server finished, from its own /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(base_url.removesuffix("/v1") + "/metrics").text
    family = next(f for f in text_string_to_metric_families(text) if f.name == "groundwork:request_success")
    return sum(s.value for s in family.samples if s.name.endswith("_total"))


def test_an_asks_llm_reranker_calls_retrieval_llm_base_url(broker_settings, remote_url, qa_collection):
    # The answer is generated in-process; the reranker's verdicts go to retrieval's own server.
    retrieval = broker_settings.retrieval.model_copy(update={"llm_base_url": remote_url})
    routed = broker_settings.model_copy(update={"retrieval": retrieval})
    rerank = {"options": {"rerank": {"enabled": True, "kind": "llm", "candidates": 3}}}
    before = _served(remote_url)
    with TestClient(create_app(routed)) as client:
        body = client.post(
            "/v1/ask", json={"collection": qa_collection, "question": QUESTION, "retrieval": rerank}
        ).json()
        assert client.app.state.groundwork.llm.engine is not None  # the answer's generator
    assert "rerank_ms" in body["timings"], body["timings"]  # the stage ran (it was skipped on asks)
    assert _served(remote_url) - before == 3  # one verdict per candidate, nothing else
    assert body["answer"] and body["sources"]
