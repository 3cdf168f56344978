"""The ingestion API end to end: real Postgres, Redis and a real worker process."""

from __future__ import annotations

import pytest

from tests.ingestion.helpers import create_collection, upload, wait_job
from tests.ingestion.samples import mixed_folder

pytestmark = [pytest.mark.integration, pytest.mark.slow]

GOOD = {"report.pdf", "otters.html", "guide.md", "memo.docx", "notes.txt"}
BAD = {"broken.pdf": "corrupt PDF", "empty.txt": "empty file", "blob.bin": "unsupported file type"}


def test_mixed_folder_ingests_with_provenance_and_reasons(client, celery_worker):
    collection = create_collection(client, "mixed", chunking={"strategy": "fixed", "chunk_size": 64})
    assert collection["embedding_dim"] == 384 and collection["index_dim"] == 128
    body = upload(client, "mixed", mixed_folder())
    outcomes = {d["filename"]: d for d in body["documents"]}
    assert outcomes.pop("empty.txt")["reason"] == "empty_file: empty file"  # refused at upload
    assert {d["status"] for d in outcomes.values()} == {"queued"}
    job = wait_job(client, body["job_id"])
    assert job["status"] == "succeeded"
    assert (job["documents_total"], job["documents_done"], job["documents_failed"]) == (8, 5, 3)
    assert job["documents_by_status"] == {"indexed": 5, "failed": 3}

    docs = {d["source_id"]: d for d in client.get("/v1/collections/mixed/documents").json()["items"]}
    assert {n for n, d in docs.items() if d["status"] == "indexed"} == GOOD
    for name, reason in BAD.items():
        assert docs[name]["status"] == "failed" and reason in docs[name]["error"], docs[name]
    failed = client.get("/v1/collections/mixed/documents", params={"status": "failed"}).json()
    assert failed["total"] == 3

    total_chunks = 0
    for name in GOOD:
        chunks = client.get(f"/v1/documents/{docs[name]['id']}/chunks").json()
        assert chunks["total"] >= 1
        total_chunks += chunks["total"]
        for chunk in chunks["items"]:
            assert chunk["text"].strip() and chunk["char_end"] > chunk["char_start"]
            assert chunk["char_end"] - chunk["char_start"] == len(chunk["text"])
    assert job["chunks_embedded"] == total_chunks

    pdf = client.get(f"/v1/documents/{docs['report.pdf']['id']}/chunks").json()["items"]
    assert {c["page"] for c in pdf} == {1, 2}
    assert any("Supply costs rose." in c["text"] and c["page"] == 2 for c in pdf)
    guide = client.get(f"/v1/documents/{docs['guide.md']['id']}/chunks").json()["items"]
    owls = next(c for c in guide if "silent" in c["text"])
    assert owls["heading_path"] == ["Field guide", "Birds", "Owls"]
    html = client.get(f"/v1/documents/{docs['otters.html']['id']}/chunks").json()["items"]
    html_text = " ".join(c["text"] for c in html)
    assert "holts" in html_text and "Cookie settings" not in html_text and "About us" not in html_text
    memo = client.get(f"/v1/documents/{docs['memo.docx']['id']}/chunks").json()["items"]
    assert any(c["heading_path"] == ["Decisions"] and "schedule" in c["text"] for c in memo)

    # Same bytes again: nothing is stored twice.
    again = upload(
        client, "mixed", {"notes.txt": mixed_folder()["notes.txt"], "copy.txt": mixed_folder()["notes.txt"]}
    )
    assert [d["status"] for d in again["documents"]] == ["unchanged", "duplicate"]
    assert wait_job(client, again["job_id"])["documents_total"] == 0

    # Delete removes the document and its chunks.
    notes_chunks = client.get(f"/v1/documents/{docs['notes.txt']['id']}/chunks").json()["total"]
    before = client.get("/v1/collections/mixed").json()["chunk_count"]
    assert client.delete(f"/v1/documents/{docs['notes.txt']['id']}").status_code == 204
    assert client.get(f"/v1/documents/{docs['notes.txt']['id']}").status_code == 404
    assert client.get("/v1/collections/mixed").json()["chunk_count"] == before - notes_chunks


def test_errors_use_the_error_model(client):
    missing = client.get("/v1/collections/nope/documents")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "collection_not_found"
    create_collection(client, "dupe-name")
    clash = client.post("/v1/collections", json={"name": "dupe-name"})
    assert clash.status_code == 409 and "already exists" in clash.json()["error"]["message"]
    bad = client.post("/v1/collections", json={"name": "x", "index_dim": 9999})
    assert bad.status_code == 422 and "index_dim" in bad.json()["error"]["message"]
    bad_chunking = client.post(
        "/v1/collections", json={"name": "y", "chunking": {"chunk_size": 64, "chunk_overlap": 40}}
    )
    assert bad_chunking.status_code == 422
    assert (
        client.get("/v1/jobs/00000000-0000-0000-0000-000000000000").json()["error"]["code"] == "job_not_found"
    )
