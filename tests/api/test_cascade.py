"""The model cascade (qa.cascade) end to end: the packaged SmolLM2 in-process answers first, capped at
3 tokens per call so that a written answer or a tool call of it is weak, and the next model is the
same weights behind a real OpenAI-compatible server (our `engine serve`, under another name), as a
vLLM backend would be. Each answer says which model answered and why it escalated; /metrics counts
the escalations."""

from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from api.main import create_app
from core.registry import resolve_model
from core.settings.qa import QASettings
from inference.async_engine import AsyncLLMEngine
from inference.server import create_app as create_engine_app
from tests.api.qa_corpus import QUESTION
from tests.support.http import running

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]

LARGE = "smollm2-large"


@pytest.fixture(scope="module")
def large_url(settings):
    engine = AsyncLLMEngine.from_settings(settings, resolve_model(settings.llm_model).path, LARGE)
    engine.start()
    try:
        with running(create_engine_app(engine, LARGE)) as url:
            yield f"{url}/v1"
    finally:
        engine.shutdown()


@pytest.fixture(scope="module")
def cascade_client(broker_settings, large_url, qa_collection):
    small = {"model": broker_settings.llm_model, "max_tokens": 3}
    cascade = [small, {"model": LARGE, "url": large_url}]
    qa = QASettings.model_validate({**broker_settings.qa.model_dump(), "cascade": cascade})
    with TestClient(create_app(broker_settings.model_copy(update={"qa": qa}))) as client:
        yield client


def unmarked(text: str) -> str:
    return re.sub(r"\s*\[\d+\]", "", text)


def escalations(client: TestClient, surface: str) -> dict[tuple[str, str], float]:
    """(model, reason) -> escalations counted on /metrics for `surface`."""
    families = text_string_to_metric_families(client.get("/metrics").text)
    return {
        (s.labels["model"], s.labels["reason"]): s.value
        for f in families
        if f.name == "groundwork:cascade_escalations"
        for s in f.samples
        if s.name.endswith("_total") and s.labels["surface"] == surface
    }


def test_a_truncated_answer_is_answered_again_by_the_next_model(cascade_client, settings):
    small = settings.llm_model
    before = escalations(cascade_client, "answer").get((small, "truncated"), 0)
    body = {"collection": "qa-docs", "question": QUESTION, "answer_mode": "generate"}
    out = cascade_client.post("/v1/ask", json=body).json()
    assert out["model"] == LARGE, out
    assert out["escalations"] == [{"from": small, "reason": "truncated"}]
    assert "12 March 2026" in out["answer"] and out["finish_reason"] != "length"
    # Both models' tokens were spent: 3 of the small one's and the large one's answer.
    assert out["usage"]["completion_tokens"] > 3

    # Streamed, only the answer that stood is sent: the small model's 3 tokens are held back.
    with cascade_client.stream("POST", "/v1/ask", json={**body, "stream": True}) as resp:
        events = [json.loads(line[5:]) for line in resp.iter_lines() if line.startswith("data:")]
    done = events[-1]
    assert done["model"] == LARGE and done["escalations"] == out["escalations"]
    streamed = "".join(e["text"] for e in events if "text" in e)
    assert unmarked(streamed) == unmarked(done["answer"])  # markers are resolved after streaming

    messages = [{"role": "user", "content": QUESTION}]
    rag = {"model": "rag/qa-docs", "messages": messages, "answer_mode": "generate"}
    chat = cascade_client.post("/v1/chat/completions", json=rag).json()
    assert chat["model"] == "rag/qa-docs" and chat["answered_by"] == LARGE, chat
    assert chat["escalations"] == [{"from": small, "reason": "truncated"}]
    assert escalations(cascade_client, "answer")[(small, "truncated")] == before + 3


def test_a_strong_quote_stands_with_the_first_model(cascade_client, settings):
    before = escalations(cascade_client, "answer")
    body = {"collection": "qa-docs", "question": QUESTION, "answer_mode": "quote"}
    out = cascade_client.post("/v1/ask", json=body).json()
    assert out["model"] == settings.llm_model and out["escalations"] == [], out
    assert "12 March 2026" in out["answer"]
    assert escalations(cascade_client, "answer") == before


def test_an_agent_turn_without_a_valid_call_is_made_by_the_next_model(cascade_client, settings):
    before = escalations(cascade_client, "agent").get((settings.llm_model, "missing_tool_call"), 0)
    run = cascade_client.post(
        "/v1/agents/runs",
        json={"agent": "rewoo", "input": QUESTION, "collections": ["qa-docs"], "tools": ["search"]},
    ).json()
    assert run["status"] == "completed", (run["detail"], run["trace"])
    turns = [s for s in run["trace"] if s["type"] == "llm"]
    assert turns and all(t["model"] == LARGE for t in turns), turns
    assert run["model"] == LARGE
    per_turn = [e for e in run["escalations"] if e["node"] is not None]
    assert per_turn == [
        {"from": settings.llm_model, "reason": "missing_tool_call", "node": t["node"]} for t in turns
    ]
    counted = escalations(cascade_client, "agent")[(settings.llm_model, "missing_tool_call")]
    assert counted == before + len(turns)
    # the answer is claim-checked; written by the last model, it stands whatever the check says
    assert run["finish_reason"] == "answered"
    checks = [s for s in run["trace"] if s["type"] == "claim_check"]
    assert len(checks) == 1 and checks[0]["model"] == LARGE and run["claims"] == checks[0]["claims"]
    assert all(c["verdict"] in ("supported", "unsupported", "unknown") for c in run["claims"])


def test_a_run_without_an_answer_is_run_again_by_the_next_model(cascade_client, settings):
    small = settings.llm_model
    before = escalations(cascade_client, "agent").get((small, "no_answer:budget_exhausted"), 0)
    # one search, and the first turn spends the tokens: no answer turn follows
    budgets = {"max_steps": 1, "max_tokens": 100, "max_repeats": 10}
    run = cascade_client.post(
        "/v1/agents/runs",
        json={"agent": "react", "input": QUESTION, "collections": ["qa-docs"], "budgets": budgets},
    ).json()
    assert run["finish_reason"] == "budget_exhausted", (run["detail"], run["trace"])
    kinds = [s["type"] for s in run["trace"]]
    retry = kinds.index("escalation")
    assert "stopped" in kinds[:retry] and "stopped" in kinds[retry:]  # two tries, each to its end
    again = [s for s in run["trace"][retry:] if s["type"] == "llm"]
    assert again and all(t["model"] == LARGE and not t["escalations"] for t in again)  # LARGE alone
    assert {"from": small, "reason": "no_answer:budget_exhausted", "node": None} in run["escalations"]
    assert run["usage"]["tool_calls"] == 2  # both tries' search, summed
    counted = escalations(cascade_client, "agent")[(small, "no_answer:budget_exhausted")]
    assert counted == before + 1
