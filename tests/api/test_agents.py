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

# NOTE: each run is several LLM calls; on a shared 2-core box one test can pass 10 minutes.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]

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
    assert run["status"] == "completed" and run["finish_reason"] == "answered", (run["detail"], run["trace"])
    assert any(s["type"] == "tool_call" and s["name"] == "search" for s in run["trace"])
    assert run["citations"] and run["citations"][0]["source_id"] == "zephyr-release.txt", run["citations"]
    assert run["usage"]["llm_calls"] >= 2 and run["usage"]["prompt_tokens"] > 0
    _assert_calls_valid(run)
    assert client.get(f"/v1/agents/runs/{run['id']}").json()["trace"] == run["trace"]


def test_client_tool_pauses_and_resumes_also_after_an_api_restart(client, settings, qa_collection):
    run = _run(client, agent="rewoo", input="Which plan does the customer Ada Lane have?", tools=[LOOKUP])
    assert run["status"] == "requires_action", run
    [call] = run["required_action"]["tool_calls"]
    assert call["name"] == "lookup_customer" and set(call["arguments"]) == {"name"}
    bad = client.post(
        f"/v1/agents/runs/{run['id']}/tool_outputs",
        json={"tool_outputs": [{"tool_call_id": "nope", "output": "x"}]},
    )
    assert bad.status_code == 400 and bad.json()["error"]["details"]["pending"] == [call["id"]]
    # A fresh API app (a restart): the paused run lives in Postgres, not in the old process.
    with TestClient(create_app(settings)) as restarted:
        assert restarted.get(f"/v1/agents/runs/{run['id']}").json()["status"] == "requires_action"
        done = restarted.post(
            f"/v1/agents/runs/{run['id']}/tool_outputs",
            json={"tool_outputs": [{"tool_call_id": call["id"], "output": "Ada Lane has the Gold plan."}]},
        ).json()
    assert done["status"] == "completed" and done["finish_reason"] == "answered", (
        done["plan"],
        done["required_action"],
    )
    results = [s for s in done["trace"] if s["type"] == "tool_result"]
    assert results[0]["output"] == "Ada Lane has the Gold plan."
    _assert_calls_valid(done, (LOOKUP,))


def test_reviewed_plan_runs_and_a_raising_tool_is_an_observation(client, qa_collection):
    run = _run(client, agent="rewoo", tools=["search", "read_chunk"], review_plan=True)
    assert run["status"] == "requires_action" and run["required_action"]["type"] == "review_plan", run
    assert run["plan"] and all(step["id"].startswith("E") for step in run["plan"])
    bad = client.post(f"/v1/agents/runs/{run['id']}/plan", json={"plan": [{"tool": "rm", "input": "-rf"}]})
    assert bad.status_code == 422
    edited = [{"tool": "read_chunk", "input": "99"}, {"tool": "search", "input": TASK}]
    done = client.post(f"/v1/agents/runs/{run['id']}/plan", json={"plan": edited}).json()
    results = [s["output"] for s in done["trace"] if s["type"] == "tool_result"]
    assert results[0].startswith("Error: read_chunk failed") and "no source [99]" in results[0], results
    assert "12 March 2026" in results[1]
    assert done["finish_reason"] == "answered" and done["plan"][0]["tool"] == "read_chunk", done


def test_spent_steps_end_the_agent_with_an_answer(client, qa_collection):
    run = _run(client, agent="react", tools=["search"], budgets={"max_steps": 1, "max_repeats": 10})
    assert run["finish_reason"] == "answered" and run["answer"], run
    assert run["usage"]["tool_calls"] == 1, run  # no search past the budget, only the answer


def test_streamed_run_sends_plan_calls_results_and_final(client, qa_collection):
    events = []
    body = {"input": TASK, "collections": ["qa-docs"], "agent": "rewoo", "tools": ["search"], "stream": True}
    with client.stream("POST", "/v1/agents/runs", json=body) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["llm", "plan"] and "tool_call" in kinds and "tool_result" in kinds, kinds
    assert kinds[-1] == "final" and events[-1]["usage"]["llm_calls"] == 2
    listed = client.get("/v1/agents/runs", params={"limit": 100}).json()["data"]
    assert events[-1]["id"] in {r["id"] for r in listed} and "trace" not in listed[0]


def test_tenant_b_cannot_see_or_search_tenant_a(client, session_factory, qa_collection):
    mine = _run(client, agent="rewoo", tools=["search"], budgets={"max_tokens": 100})  # stops after planning
    with session_scope(session_factory) as session:
        _, key = create_api_key(session, get_or_create_tenant(session, "agents-tenant-b"), "t")
    b = {"authorization": f"Bearer {key}"}
    assert client.get(f"/v1/agents/runs/{mine['id']}", headers=b).status_code == 404
    assert client.post(f"/v1/agents/runs/{mine['id']}/cancel", headers=b).status_code == 404
    assert mine["id"] not in {r["id"] for r in client.get("/v1/agents/runs", headers=b).json()["data"]}
    refused = client.post("/v1/agents/runs", headers=b, json={"input": TASK, "collections": ["qa-docs"]})
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "collection_not_found"
