"""Storage quotas on every path that adds documents or dataset files: refusals are 413
quota_exceeded (never a 500), concurrent uploads cannot pass a quota together, rejected files do
not count, eval dataset uploads count and can be deleted, and eval ingest stops at the quota."""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from api.main import build_state, create_app
from core.database import session_scope
from core.models import Collection, Document, DocumentStatus, EvalRun
from core.quotas import QuotaExceeded, check_quota, lock_usage, tenant_datasets_dir
from core.settings.limits import LimitSettings
from core.tenancy import create_api_key, get_or_create_tenant
from evals import runner, service
from inference.provider import LLMProvider
from retrieval.corpus import CorpusDoc, add_documents
from retrieval.models import RetrievalModels
from tests.support.http import running

pytestmark = pytest.mark.integration


def _strict(settings, **knobs):
    limits = LimitSettings(enabled=False, **knobs)
    return settings.model_copy(update={"auth_required": True, "limits": limits})


def _tenant_key(session_factory) -> tuple[uuid.UUID, dict]:
    with session_scope(session_factory) as session:
        tenant = get_or_create_tenant(session, f"quota-{uuid.uuid4().hex[:8]}")
        _, plain = create_api_key(session, tenant, "q")
        return tenant.id, {"authorization": f"Bearer {plain}"}


def _files(prefix: str, n: int, size: int = 20) -> list:
    return [("files", (f"{prefix}-{i}.txt", f"{prefix} {i} ".encode().ljust(size, b"x"))) for i in range(n)]


def _stored(session_factory, tenant: uuid.UUID) -> int:
    with session_factory() as session:
        return session.scalar(
            select(func.count()).where(Document.tenant_id == tenant, Document.status != DocumentStatus.failed)
        )


def test_storage_quota_refusal_is_a_413_and_rejected_files_do_not_count(settings, session_factory):
    strict = _strict(settings, max_documents_per_tenant=2, max_stored_mb_per_tenant=0.0001)  # 100 bytes
    tenant, key = _tenant_key(session_factory)
    with TestClient(create_app(strict)) as client:
        assert client.post("/v1/collections", json={"name": "q"}, headers=key).status_code == 201
        big = client.post("/v1/collections/q/documents", files=_files("big", 1, 150), headers=key)
        assert big.status_code == 413, big.text
        assert big.json()["error"]["code"] == "quota_exceeded" and "storage quota" in big.text
        # An empty file is rejected (a failed document): it holds nothing and takes no room.
        mixed = _files("ok", 2) + [("files", ("empty.txt", b""))]
        ok = client.post("/v1/collections/q/documents", files=mixed, headers=key)
        assert ok.status_code == 202, ok.text
        assert sorted(d["status"] for d in ok.json()["documents"]) == ["failed", "queued", "queued"]
        again = client.post("/v1/collections/q/documents", files=_files("more", 1), headers=key)
        assert again.status_code == 413 and again.json()["error"]["code"] == "quota_exceeded"
    assert _stored(session_factory, tenant) == 2


def test_six_concurrent_uploads_do_not_pass_the_document_quota(settings, session_factory):
    strict = _strict(settings, max_documents_per_tenant=10)
    tenant, key = _tenant_key(session_factory)
    state = build_state(strict)
    app = create_app(strict, state)
    app.state.groundwork = state
    with running(app) as base, httpx.Client(base_url=base, headers=key, timeout=60) as http:
        assert http.post("/v1/collections", json={"name": "c"}).status_code == 201

        def upload(i: int) -> int:
            with httpx.Client(base_url=base, headers=key, timeout=60) as own:
                return own.post("/v1/collections/c/documents", files=_files(f"u{i}", 3)).status_code

        with ThreadPoolExecutor(6) as pool:
            codes = list(pool.map(upload, range(6)))
    state.engine.dispose()
    stored = _stored(session_factory, tenant)
    print(f"6 concurrent uploads of 3 files, quota 10: {sorted(codes)}, stored {stored}")
    assert sorted(codes) == [202, 202, 202, 413, 413, 413] and stored == 9


def test_eval_dataset_uploads_count_in_the_quota_and_can_be_deleted(settings, session_factory):
    strict = _strict(settings, max_stored_mb_per_tenant=0.001)  # 1,000 bytes
    _, key = _tenant_key(session_factory)
    _, other = _tenant_key(session_factory)
    dataset = [("files", ("items.jsonl", json.dumps({"question": "q", "answer": "a" * 600}).encode()))]
    with TestClient(create_app(strict)) as client:
        first = client.post("/v1/evals/datasets", files=dataset, headers=key)
        assert first.status_code == 201, first.text
        second = client.post("/v1/evals/datasets", files=dataset, headers=key)
        assert second.status_code == 413 and second.json()["error"]["code"] == "quota_exceeded"
        dataset_id = first.json()["id"]
        assert client.delete(f"/v1/evals/datasets/{dataset_id}", headers=other).status_code == 404
        assert client.delete(f"/v1/evals/datasets/{dataset_id}", headers=key).status_code == 204
        assert client.delete(f"/v1/evals/datasets/{dataset_id}", headers=key).status_code == 404
        assert client.delete("/v1/evals/datasets/%2e%2e", headers=key).status_code == 404
        assert client.post("/v1/evals/datasets", files=dataset, headers=key).status_code == 201


def test_eval_ingest_stops_at_the_document_quota(settings, session_factory):
    """The run's corpus (5 documents) cannot fit a 3-document quota: the run fails with the reason
    and the tenant holds no more than the quota."""
    strict = _strict(settings, max_documents_per_tenant=3)
    tenant, _ = _tenant_key(session_factory)
    folder = tenant_datasets_dir(strict.data_dir, tenant) / "corpus5"
    folder.mkdir(parents=True)
    (folder / "items.jsonl").write_text(json.dumps({"question": "what rises?", "answer": "bread"}))
    corpus = [{"_id": f"d{i}", "text": f"document number {i} about bread"} for i in range(5)]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus))
    body = service.EvalCreate(kind="answer", dataset={"path": f"uploads/{tenant}/corpus5", "format": "jsonl"})
    with session_scope(session_factory) as session:
        run_id = service.create_run(session, strict, tenant, body, None).id
    ctx = runner.RunContext(strict, session_factory, "test@local", LLMProvider(strict), RetrievalModels())
    assert runner.run_eval(ctx, run_id, "test-task") == "failed"
    with session_factory() as session:
        error = session.get(EvalRun, run_id).error
    assert "document quota" in error, error
    assert _stored(session_factory, tenant) <= 3


def test_a_quota_check_waits_for_the_tenants_transaction_in_flight(settings, session_factory):
    """Check then insert is atomic per tenant: a second check blocks until the first adder commits,
    then counts its rows (without the lock both would see the old count and pass together)."""
    knobs = LimitSettings(max_documents_per_tenant=4)
    tenant, _ = _tenant_key(session_factory)
    with session_scope(session_factory) as session:
        # Two collections: the second adder is not held back by the first one's collection rows.
        collection, other = (
            Collection(tenant_id=tenant, name=name, embedding_model="m", embedding_dim=8, index_dim=8)
            for name in ("lock-a", "lock-b")
        )
        session.add_all([collection, other])
    docs = [CorpusDoc(f"d{i}", "text") for i in range(3)]
    vectors = np.eye(3, 8, dtype=np.float32)

    def add_three() -> str:
        with session_factory() as session:
            lock_usage(session, tenant)
            add_documents(session, other, docs, vectors)
            try:
                check_quota(session, tenant, knobs, settings.data_dir)
            except QuotaExceeded:
                session.rollback()
                return "refused"
            session.commit()
            return "added"

    with session_factory() as first:
        lock_usage(first, tenant)
        add_documents(first, collection, docs, vectors)
        check_quota(first, tenant, knobs, settings.data_dir)
        with ThreadPoolExecutor(1) as pool:
            second = pool.submit(add_three)
            time.sleep(1.0)
            assert not second.done(), "the second check did not wait for the first transaction"
            first.commit()
            assert second.result(timeout=30) == "refused"
    assert _stored(session_factory, tenant) == 3
