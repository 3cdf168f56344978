"""Tenant isolation in depth: tenant B gets 404 for tenant A's objects on every route, the database
itself hides A's rows from the application's role when no tenant is set, and keys have scopes."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from api.main import create_app
from core.database import session_scope
from core.models import AgentRun, Conversation, EvalRun, JobStatus, Message
from core.tenancy import APP_ROLE, create_api_key, get_or_create_tenant

pytestmark = pytest.mark.integration

ISOLATED = (
    "collections",
    "documents",
    "chunks",
    "ingestion_jobs",
    "conversations",
    "agent_runs",
    "eval_runs",
    "eval_items",
    "message_feedback",
)
OWNED = ("collections", "documents", "ingestion_jobs")  # rows the fixture creates (no worker: no chunks)


def _key(session_factory, tenant: str, scopes=None, expires_at=None) -> tuple[dict, uuid.UUID]:
    with session_scope(session_factory) as session:
        row = get_or_create_tenant(session, tenant)
        _, plain = create_api_key(session, row, "test", scopes, expires_at)
        return {"authorization": f"Bearer {plain}"}, row.id


@pytest.fixture(scope="module")
def two_tenants(settings, session_factory):
    """Tenant A with a collection, a document (and its job) and tenant B, on an auth-required API."""
    suffix = uuid.uuid4().hex[:8]
    a, a_id = _key(session_factory, f"a-{suffix}")
    b, _ = _key(session_factory, f"b-{suffix}")
    strict = settings.model_copy(update={"auth_required": True})
    with TestClient(create_app(strict)) as client:
        col = client.post("/v1/collections", json={"name": "secret"}, headers=a).json()
        up = client.post(
            f"/v1/collections/{col['id']}/documents",
            files=[("files", ("a.txt", b"tenant A's secret plans", "text/plain"))],
            headers=a,
        ).json()
        ids = {
            "collection": col["id"],
            "collection_id": col["id"],
            "document_id": up["documents"][0]["document_id"],
            "job_id": up["job_id"],
            "prefix": "gw_nothere",
            **_runs_of(session_factory, a_id),
        }
        yield client, a, b, ids, a_id


def _runs_of(session_factory, tenant: uuid.UUID) -> dict[str, str]:
    """Tenant A's agent run, eval run and answer message, written directly (no engine needed)."""
    with session_scope(session_factory) as session:
        agent = AgentRun(tenant_id=tenant, agent="react", status="requires_action", input="secret task")
        evaluation = EvalRun(tenant_id=tenant, kind="retrieval", status=JobStatus.succeeded)
        conversation = Conversation(tenant_id=tenant)
        session.add_all([agent, evaluation, conversation])
        session.flush()
        message = Message(conversation_id=conversation.id, role="assistant", content="secret answer")
        session.add(message)
        session.flush()
        return {
            "agent_run": str(agent.id),
            "eval_run": str(evaluation.id),
            "other_id": str(evaluation.id),
            "message_id": str(message.id),
        }


NOBODY = "00000000-0000-4000-8000-000000000000"
# Bodies valid for their route, so that the answer can only be 404 (not a 422 for the body).
BODIES = {
    "/tool_outputs": {"tool_outputs": [{"tool_call_id": "call_1", "output": "x"}]},
    "/feedback": {"rating": "down"},
    "/search": {"query": "secret"},
    "/connectors": {"name": "b", "kind": "folder", "config": {}},
}


def test_tenant_b_gets_404_for_tenant_a_objects_on_every_route(two_tenants):
    client, a, b, ids, _ = two_tenants
    checked, leaks = 0, []
    for template, operations in client.get("/openapi.json").json()["paths"].items():
        params = re.findall(r"{(\w+)}", template)
        if not params or "prefix" in params:  # (API keys are scoped by tenant in their query)
            continue
        run = ids["agent_run"] if template.startswith("/v1/agents/") else ids["eval_run"]
        # NOTE: a route whose object tenant A has none of (a connector, a dataset) is asked about an
        # id nobody has: the answer must still be 404, never a 422 or a 500.
        path = template.format(**{p: run if p == "run_id" else ids.get(p, NOBODY) for p in params})
        for method in (m.upper() for m in operations):
            body = next((b for suffix, b in BODIES.items() if path.endswith(suffix)), {})
            kwargs: dict = {"json": body}
            if method == "POST" and path.endswith("/documents"):
                kwargs = {"files": [("files", ("b.txt", b"B's text", "text/plain"))]}
            resp = client.request(method, path, headers=b, **kwargs)
            if resp.status_code != 404:
                leaks.append((method, path, resp.status_code, resp.text[:300]))
            checked += 1
    assert not leaks, leaks
    assert checked >= 25, checked
    ask = client.post("/v1/ask", json={"collection": ids["collection"], "question": "q"}, headers=b)
    assert ask.status_code == 404
    chat = client.post(
        "/v1/chat/completions",
        json={"model": f"rag/{ids['collection']}", "messages": [{"role": "user", "content": "q"}]},
        headers=b,
    )
    assert chat.status_code == 404
    assert client.get("/v1/collections", headers=b).json() == []
    assert client.get(f"/v1/documents/{ids['document_id']}", headers=a).status_code == 200
    assert client.get(f"/v1/agents/runs/{ids['agent_run']}", headers=a).status_code == 200
    assert client.get(f"/v1/evals/{ids['eval_run']}", headers=a).status_code == 200


def test_without_the_tenant_setting_the_app_role_sees_no_rows(two_tenants, db_engine):
    _, _, _, ids, a_id = two_tenants
    with db_engine.connect() as conn:
        owner = {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in OWNED}
        assert all(owner.values()), owner  # the owner (worker, CLI) sees rows
        conn.rollback()
        with conn.begin():
            conn.execute(text(f"SET LOCAL ROLE {APP_ROLE}"))
            for table in ISOLATED:  # a query that forgot its tenant filter
                assert conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one() == 0, table
            conn.execute(text("SELECT set_config('app.tenant_id', :t, true)"), {"t": str(uuid.uuid4())})
            assert conn.execute(text("SELECT count(*) FROM documents")).scalar_one() == 0
            conn.execute(text("SELECT set_config('app.tenant_id', :t, true)"), {"t": str(a_id)})
            docs = conn.execute(text("SELECT id FROM documents")).scalars().all()
            assert str(ids["document_id"]) in {str(d) for d in docs}
            with pytest.raises(Exception, match="row-level security"):  # no writes into another tenant
                conn.execute(
                    text("UPDATE documents SET tenant_id = :other WHERE id = :d"),
                    {"other": str(uuid.uuid4()), "d": ids["document_id"]},
                )


def test_key_scopes_and_expiry(two_tenants, session_factory):
    client, a, _, ids, _ = two_tenants
    tenant = client.get("/v1/admin/keys", headers=a)
    assert tenant.status_code == 200 and tenant.json()
    made = client.post("/v1/admin/keys", json={"name": "reader", "scopes": ["read"]}, headers=a)
    assert made.status_code == 201, made.text
    reader = {"authorization": f"Bearer {made.json()['key']}"}
    assert client.get("/v1/collections", headers=reader).status_code == 200
    search = client.post(
        f"/v1/collections/{ids['collection']}/search", json={"query": "x", "mode": "bm25"}, headers=reader
    )
    assert search.status_code == 200, search.text  # searching only reads
    denied = client.post("/v1/collections", json={"name": "nope"}, headers=reader)
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "insufficient_scope"
    assert client.get("/v1/admin/keys", headers=reader).status_code == 403
    assert client.get("/metrics", headers=reader).status_code == 403
    assert client.get("/metrics").status_code == 401
    operator_only = client.get("/metrics", headers=a)  # a tenant's admin is no operator (issue 28)
    assert operator_only.status_code == 403 and operator_only.json()["error"]["code"] == "not_operator"
    assert client.delete(f"/v1/admin/keys/{made.json()['prefix']}", headers=a).status_code == 204
    assert client.get("/v1/collections", headers=reader).status_code == 401
    expired, _ = _key(session_factory, "expired", expires_at=datetime.now(UTC) - timedelta(seconds=1))
    gone = client.get("/v1/collections", headers=expired)
    assert gone.status_code == 401 and "expired" in gone.json()["error"]["message"]
    spec = client.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
