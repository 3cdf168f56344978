"""Bad input gets a 4xx with a reason before it reaches the engine (issue 12, found by trying it
against a running platform: these answered 500 or hung)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration

HUGE_SEED = 2**64


def _chat(client, **body):
    return client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], **body})


def test_out_of_range_seeds_are_refused_on_every_path(client):
    for seed in (HUGE_SEED, -1):
        ask = client.post("/v1/ask", json={"collection": "x", "question": "q", "generation": {"seed": seed}})
        assert ask.status_code == 422 and "generation.seed" in ask.json()["error"]["message"], ask.text
        for model in ("rag/x", "any-model"):
            chat = _chat(client, model=model, seed=seed)
            assert chat.status_code == 422 and "seed" in chat.json()["error"]["message"], chat.text


def test_rag_models_refuse_empty_oversized_and_nameless_requests(client):
    empty = client.post(
        "/v1/chat/completions", json={"model": "rag/x", "messages": [{"role": "user", "content": ""}]}
    )
    assert empty.status_code == 422 and "messages[-1].content" in empty.json()["error"]["message"]
    long = client.post(
        "/v1/chat/completions", json={"model": "rag/x", "messages": [{"role": "user", "content": "a" * 8001}]}
    )
    assert long.status_code == 422 and "8000" in long.json()["error"]["message"]
    nameless = _chat(client, model="rag/")
    assert nameless.status_code == 400 and "rag/<collection>" in nameless.json()["error"]["message"]
    constrained = _chat(client, model="rag/x", response_format={"type": "json_object"})
    assert constrained.status_code == 400 and constrained.json()["error"]["code"] == "unsupported_constraint"


def test_output_constraints_are_enforced_or_refused_never_dropped(client):
    bad_schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "no-such-type"}}}
    for body in (
        {"response_format": bad_schema},
        {"response_format": {"type": "yaml"}},
        {"tools": [{"type": "function"}]},
        {"tool_choice": "required"},
        {"guided_regex": ""},
    ):
        resp = _chat(client, model="whatever", **body)
        assert resp.status_code == 400, (body, resp.text)
        assert resp.json()["error"]["code"] == "invalid_request", resp.text
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    valid_tools = _chat(client, model="whatever", tools=[tool])
    assert valid_tools.status_code == 400 and valid_tools.json()["error"]["code"] == "unsupported_constraint"


def test_unknown_retrieval_keys_are_refused(client):
    create = client.post("/v1/collections", json={"name": "bad-input"})
    assert create.status_code in (201, 409), create.text
    for retrieval, where in (
        ({"top_kk": 3}, "top_kk"),
        ({"filters": {"document_id": []}}, "document_id"),
        ({"options": {"bm25": {"k": 1.2}}}, "options.bm25.k"),
        ({"query": "other"}, "query"),
    ):
        resp = client.post(
            "/v1/ask", json={"collection": "bad-input", "question": "q", "retrieval": retrieval}
        )
        assert resp.status_code == 422 and where in resp.json()["error"]["message"], resp.text
    cid = client.get("/v1/collections/bad-input").json()["id"]
    search = client.post(f"/v1/collections/{cid}/search", json={"query": "q", "modee": "bm25"})
    assert search.status_code == 422 and "modee" in search.json()["error"]["message"], search.text
    options = client.post(f"/v1/collections/{cid}/search", json={"query": "q", "options": {"topk": 1}})
    assert options.status_code == 422 and "options.topk" in options.json()["error"]["message"]


@pytest.mark.slow
def test_prompt_over_the_context_is_a_400_naming_the_limit(client):
    backend = client.app.state.groundwork.llm.backend()  # the packaged SmolLM2 in-process engine
    words = " ".join(["word"] * 20_000)
    resp = client.post(
        "/v1/chat/completions",
        json={"model": backend.model_name, "messages": [{"role": "user", "content": words}], "max_tokens": 4},
    )
    assert resp.status_code == 400, resp.text
    limit = str(backend.engine.max_model_len)
    assert limit in resp.json()["error"]["message"], resp.text


def test_tenants_cannot_name_models_outside_the_allowlist(client):
    for spec in ("/etc/passwd", "../../models/x", "someone/huge-model"):
        resp = client.post("/v1/collections", json={"name": "m", "embedding_model": spec})
        assert resp.status_code == 422 and resp.json()["error"]["code"] == "model_not_allowed", resp.text
    cid = client.post("/v1/collections", json={"name": "allowlist"}).json()["id"]
    patch = client.patch(f"/v1/collections/{cid}", json={"embedding_model": "/root"})
    assert patch.status_code == 422 and patch.json()["error"]["code"] == "model_not_allowed"
    rerank = {"rerank": {"enabled": True, "model": "/opt/ce"}}
    search = client.post(f"/v1/collections/{cid}/search", json={"query": "q", "options": rerank})
    assert search.status_code == 422 and search.json()["error"]["code"] == "model_not_allowed"


def test_values_postgres_refuses_are_a_400_not_a_500(client):
    """Found by the schemathesis run: a NUL byte in a name or task, an offset past bigint."""
    nul = client.get("/v1/collections/a%00b/documents")
    assert nul.status_code == 400 and "NUL" in nul.json()["error"]["message"], nul.text
    run = client.post("/v1/agents/runs", json={"input": "find \u0000 this", "background": True})
    assert run.status_code == 400 and run.json()["error"]["code"] == "invalid_value", run.text
    far = client.get("/v1/collections/any/documents", params={"offset": 2**63})
    assert far.status_code == 422, far.text
