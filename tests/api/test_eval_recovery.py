"""A worker SIGKILLed in the middle of an evaluation run: a fresh worker resumes it, and no item is
evaluated twice (every item row is written once, and the first worker's rows are kept)."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from api.main import create_app
from core.database import session_scope
from core.models import EvalItem, EvalRun
from tests.api.test_evals import create_run, upload_dataset, wait_run
from tests.support.services import WorkerProcess, unique_name, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

N = 40
WORDS = "amber basil cedar dune ember fjord grove heath inlet juniper kelp lagoon marsh nettle oak".split()


def _dataset() -> list:
    docs = [
        {"_id": f"d{i}", "text": f"note {i} " + " ".join(WORDS[(i * k) % 15] for k in range(1, 9))}
        for i in range(N)
    ]
    queries = [{"_id": f"q{i}", "text": f"note {i} {WORDS[i % 15]} {WORDS[(2 * i) % 15]}"} for i in range(N)]
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(N))
    return [
        ("files", ("corpus.jsonl", "\n".join(json.dumps(d) for d in docs).encode())),
        ("files", ("queries.jsonl", "\n".join(json.dumps(q) for q in queries).encode())),
        ("files", ("qrels/test.tsv", qrels.encode())),
    ]


def _items(session_factory, run_id) -> list[tuple[str, str, str]]:
    with session_scope(session_factory) as session:
        rows = session.execute(
            select(EvalItem.variant, EvalItem.item_key, EvalItem.worker).where(EvalItem.run_id == run_id)
        )
        return [tuple(r) for r in rows]


def test_sigkilled_worker_run_resumes_without_evaluating_an_item_twice(
    broker_settings, database_url, session_factory, tmp_path, monkeypatch
):
    settings = broker_settings.model_copy(update={"celery_queue": unique_name("gwq_evalkill")})
    monkeypatch.setenv("GROUNDWORK_INGESTION__STALE_AFTER_S", "5")
    monkeypatch.setenv("GROUNDWORK_INGESTION__RECOVERY_INTERVAL_S", "1")
    monkeypatch.setenv("GROUNDWORK_INGESTION__TORCH_THREADS", "1")
    with TestClient(create_app(settings)) as client:
        path = upload_dataset(client, _dataset())
        first = WorkerProcess(settings, database_url, tmp_path / "first.log")
        first.start()
        try:
            run = create_run(
                client, kind="retrieval", dataset={"path": path}, sweep={"mode": ["bm25", "dense", "hybrid"]}
            )
            wait_until(lambda: len(_items(session_factory, run["id"])) >= 10, 240, message="10 items")
        finally:
            first.kill()
        at_kill = _items(session_factory, run["id"])
        assert len(at_kill) < 3 * N, "the run finished before the kill: nothing was tested"
        assert client.get(f"/v1/evals/{run['id']}").json()["status"] == "running"

        second = WorkerProcess(settings, database_url, tmp_path / "second.log")
        second.start()
        try:
            done = wait_run(client, run["id"], timeout=300)
        finally:
            second.stop()
    assert done["status"] == "succeeded", (done["error"], second.log_tail())
    items = _items(session_factory, run["id"])
    keys = [(variant, key) for variant, key, _ in items]
    assert len(items) == 3 * N and len(set(keys)) == 3 * N  # every item once
    assert set(at_kill) <= set(items)  # the dead worker's results were kept, not redone
    first_workers = {w for _, _, w in at_kill}
    assert {w for _, _, w in items} - first_workers  # the rest came from the second worker
    assert sum(w in first_workers for _, _, w in items) == len(at_kill)
    with session_scope(session_factory) as session:
        row = session.get(EvalRun, done["id"])
        assert (row.items_done, row.attempts) == (3 * N, 2)
        assert session.scalar(select(func.count()).where(EvalItem.run_id == row.id)) == 3 * N
    assert done["metrics"]["variants"]["mode=bm25"]["items"] == N
