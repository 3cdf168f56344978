"""Agent runs end to end: the packaged SmolLM2 in our engine (grammar-constrained tool calls), the
real worker's ingested corpus, hybrid retrieval and the LangGraph checkpointer in Postgres."""

from __future__ import annotations

import json

import jsonschema
import pytest
from fastapi.testclient import TestClient

from agents.tools import BUILTIN, final_answer_tool
from api.main import create_app
from core.database import session_scope
from core.tenancy import create_api_key, get_or_create_tenant

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TASK = "When was Zephyr 4.2 released?"
LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup_customer",
        "description": "Look up a customer's plan by their name.",
        "parameters": {
            "type": "object",
            "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 40}},
            "required": ["name"],
        },
    },
}


def _run(client, **body) -> dict:
    resp = client.post("/v1/agents/runs", json={"input": TASK, "collections": ["qa-docs"], **body})
    assert resp.status_code == 200, resp.text
    return resp.json()


def _schemas(run: dict, extra: tuple = ()) -> dict:
    tools = [BUILTIN[n].openai() for n in BUILTIN] + [final_answer_tool(), *extra]
    return {t["function"]["name"]: t["function"]["parameters"] for t in tools}


def _assert_calls_valid(run: dict, extra: tuple = ()) -> None:
    """Every call the engine emitted parses and validates against the schema it was offered."""
    schemas = _schemas(run, extra)
    calls = [c for s in run["trace"] if s["type"] == "llm" for c in s["tool_calls"]]
    assert calls, run["trace"]
    for call in calls:
        assert call["error"] is None, call
        if call["name"] in schemas:
            jsonschema.validate(call["arguments"], schemas[call["name"]])


@pytest.mark.parametrize("agent", ["react", "rewoo", "plan_execute"])
def test_each_agent_searches_and_cites_the_right_document(client, qa_collection, agent):
    run = _run(client, agent=agent, tools=["search"])
    print(json.dumps(run["trace"], indent=1)[:6000])
    assert run["status"] == "completed" and run["finish_reason"] == "answered", run
    assert any(s["type"] == "tool_call" and s["name"] == "search" for s in run["trace"])
    assert run["citations"] and run["citations"][0]["source_id"] == "zephyr-release.txt", run["citations"]
    assert run["usage"]["llm_calls"] >= 2 and run["usage"]["prompt_tokens"] > 0
    _assert_calls_valid(run)
    assert client.get(f"/v1/agents/runs/{run['id']}").json()["trace"] == run["trace"]
