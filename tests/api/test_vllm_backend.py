"""The platform on a real vLLM server (`engine.backend = "vllm"`): one supervised vLLM OpenAI server
for the session on the packaged SmolLM2 (its venv built by `groundwork vllm install`, which
`./dev.sh test` runs), the API and a worker of their own pointing at it.

Skips, saying why, only where vLLM's venv is missing (`groundwork vllm install` could not run)."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from inference.client import complete_chat
from inference.protocol import SamplingParams
from inference.provider import LLMProvider
from inference.supervisor import SupervisedServer
from inference.vllm_server import VLLMNotInstalled, server_spec, vllm_python
from tests.api.qa_corpus import DOCS, QUESTION
from tests.api.test_agents import LOOKUP, _assert_calls_valid
from tests.api.test_evals import create_run, upload_dataset, wait_run
from tests.support.services import WorkerProcess, unique_name

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.vllm, pytest.mark.timeout(1200)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def vllm_settings(broker_settings):
    try:
        vllm_python(broker_settings.engine.vllm)
    except VLLMNotInstalled as exc:
        pytest.skip(str(exc))
    # NOTE: eager: torch.compile at start-up takes minutes on a busy 2-core machine.
    vllm = broker_settings.engine.vllm.model_copy(update={"port": _free_port(), "enforce_eager": True})
    engine = broker_settings.engine.model_copy(update={"backend": "vllm", "vllm": vllm})
    return broker_settings.model_copy(update={"engine": engine, "celery_queue": unique_name("gwq-vllm")})


@pytest.fixture(scope="session")
def vllm_server(vllm_settings):
    """The session's one vLLM server (start-up, with compilation, takes a minute or more)."""
    server = SupervisedServer(server_spec(vllm_settings))
    server.start()
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


class _VLLMWorker(WorkerProcess):
    def env(self) -> dict[str, str]:
        vllm = self.settings.engine.vllm
        return {
            **super().env(),
            "GROUNDWORK_ENGINE__BACKEND": "vllm",
            "GROUNDWORK_ENGINE__VLLM__PORT": str(vllm.port),
        }


@pytest.fixture(scope="session")
def vllm_client(vllm_settings, vllm_server, qa_collection, celery_app, tmp_path_factory):
    """The API and a worker of their own on vLLM; the QA corpus ingested by the session's worker."""
    worker = _VLLMWorker(
        vllm_settings, vllm_settings.database_url, tmp_path_factory.mktemp("vllm-worker") / "worker.log"
    )
    worker.start()
    try:
        with TestClient(create_app(vllm_settings)) as client:
            worker.wait_ready(celery_app, timeout=180)
            yield client
    finally:
        worker.stop()


def test_ask_cites_its_source_from_vllm(vllm_client):
    body = vllm_client.post("/v1/ask", json={"collection": "qa-docs", "question": QUESTION}).json()
    assert vllm_client.app.state.groundwork.llm.engine is None  # nothing generated in-process
    assert "12 March 2026" in body["answer"], body
    assert body["citations"] and body["citations"][0]["source_id"] == "zephyr-release.txt"
    assert body["usage"]["completion_tokens"] > 0 and body["usage"]["prompt_tokens"] > 0


def test_streamed_answer_and_quote_grammar_through_vllm_structured_outputs(vllm_client):
    body = {"collection": "qa-docs", "question": QUESTION, "answer_mode": "quote", "stream": True}
    with vllm_client.stream("POST", "/v1/ask", json=body) as r:
        assert r.status_code == 200
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "sources" and kinds[-1] == "done" and "token" in kinds
    done = events[-1]
    # vLLM applied our quote grammar (xgrammar EBNF): streamed as generated, no fallback
    assert done["answer_mode_used"] == "quote" and done["quote_method"] == "grammar", done
    assert "12 March 2026" in done["answer"]


def test_agent_run_with_a_client_tool_on_vllm(vllm_client):
    # ReWOO, as on our engine (tests/api/test_agents.py): its plan must call the one tool offered.
    resp = vllm_client.post(
        "/v1/agents/runs",
        json={
            "input": "Which plan does the customer Ada Lane have?",
            "agent": "rewoo",
            "collections": ["qa-docs"],
            "tools": [LOOKUP],
        },
    )
    run = resp.json()
    assert resp.status_code == 200 and run["status"] == "requires_action", run
    [call] = run["required_action"]["tool_calls"]
    assert call["name"] == "lookup_customer" and set(call["arguments"]) == {"name"}, call
    done = vllm_client.post(
        f"/v1/agents/runs/{run['id']}/tool_outputs",
        json={"tool_outputs": [{"tool_call_id": call["id"], "output": "Ada Lane has the Gold plan."}]},
    ).json()
    assert done["status"] == "completed", done
    # vLLM constrained every call's arguments to their schema (`--tool-strict-level parameter`).
    _assert_calls_valid(done, (LOOKUP,))


def test_answer_eval_with_claim_check_runs_on_vllm(vllm_client):
    corpus = "\n".join(json.dumps({"_id": name, "text": data.decode()}) for name, data in DOCS.items())
    item = {
        "id": "release",
        "question": QUESTION,
        "answer": "12 March 2026",
        "gold_doc_ids": ["zephyr-release.txt"],
    }
    files = [
        ("files", ("items.jsonl", json.dumps(item).encode())),
        ("files", ("corpus.jsonl", corpus.encode())),
    ]
    body = {
        "kind": "answer",
        "dataset": {"path": upload_dataset(vllm_client, files), "format": "jsonl"},
        "generation": {"max_tokens": 48, "answer_mode": "generate"},
        "judge": {"repeats": 1},
    }
    run = wait_run(vllm_client, create_run(vllm_client, **body)["id"], timeout=900)
    assert run["status"] == "succeeded", run["error"]
    [release] = vllm_client.get(f"/v1/evals/{run['id']}/items").json()
    assert release["metrics"]["contains_gold"] == 1.0, release["output"]
    assert 0.0 <= release["metrics"]["faithfulness_model_judged"] <= 1.0
    assert release["output"]["judge_tokens"] > 0


def test_tenant_salts_isolate_vllm_prefix_caches(vllm_settings, vllm_server):
    provider = LLMProvider(vllm_settings)
    source = " ".join(f"Fact {i}: the relay in room {i} opens at {i + 7} o'clock." for i in range(60))
    messages = [{"role": "system", "content": source}, {"role": "user", "content": "When does room 3 open?"}]
    params = SamplingParams(max_tokens=2, temperature=0.0)

    def cached(salt: str) -> int:
        _, final = asyncio.run(complete_chat(provider.backend(cache_salt=salt), messages, params))
        assert final.usage is not None
        return final.usage.cached_tokens

    assert cached("tenant-a") == 0
    assert cached("tenant-a") >= 256  # the tenant's own prompt is served from its cache
    assert cached("tenant-b") == 0  # another tenant's identical prompt is not
