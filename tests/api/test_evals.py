"""Evaluation runs through the API and the real worker: a retrieval run, a sweep with its table and
plot, compare, apply (later searches change), tenant isolation and clear refusals."""

from __future__ import annotations

import json
import time

import pytest
import pytrec_eval

from core.database import session_scope
from core.tenancy import create_api_key, get_or_create_tenant

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CORPUS = [
    {"_id": "tides", "title": "Tides", "text": "The moon's gravity pulls the oceans and causes the tides."},
    {"_id": "bread", "title": "Bread", "text": "Yeast makes bread dough rise before baking in the oven."},
    {"_id": "disk", "title": "Error codes", "text": "Error E-7731 means that the disk is full."},
    {"_id": "bees", "title": "Bees", "text": "Honey bees dance to tell the hive where flowers are."},
    {"_id": "volcano", "title": "Volcanoes", "text": "Magma rising through the crust erupts as lava."},
]
QUERIES = [
    {"_id": "q1", "text": "why do oceans have tides"},
    {"_id": "q2", "text": "E-7731 disk error"},
    {"_id": "q3", "text": "how do bees communicate about flowers"},
]
QRELS = "query-id\tcorpus-id\tscore\nq1\ttides\t1\nq2\tdisk\t2\nq3\tbees\t1\nq3\tbread\t0\n"


def beir_files() -> list:
    return [
        ("files", ("corpus.jsonl", "\n".join(json.dumps(d) for d in CORPUS).encode())),
        ("files", ("queries.jsonl", "\n".join(json.dumps(q) for q in QUERIES).encode())),
        ("files", ("qrels/test.tsv", QRELS.encode())),
    ]


def upload_dataset(client, files) -> str:
    response = client.post("/v1/evals/datasets", files=files)
    assert response.status_code == 201, response.text
    return response.json()["path"]


def wait_run(client, run_id: str, timeout: float = 300, headers=None) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = client.get(f"/v1/evals/{run_id}", headers=headers).json()
        if run["status"] not in ("queued", "running"):
            return run
        time.sleep(0.3)
    raise TimeoutError(f"eval run {run_id} still {run['status']}: {run}")


def create_run(client, **body) -> dict:
    response = client.post("/v1/evals", json=body)
    assert response.status_code == 202, response.text
    return response.json()


def test_retrieval_run_sweep_compare_and_apply(client, celery_worker, session_factory):
    path = upload_dataset(client, beir_files())
    plain = wait_run(
        client, create_run(client, kind="retrieval", dataset={"path": path}, retrieval={"mode": "bm25"})["id"]
    )
    assert plain["status"] == "succeeded", plain["error"]
    assert plain["items_done"] == plain["items_total"] == 3 and plain["fraction_done"] == 1.0
    metrics = plain["metrics"]
    assert metrics["mrr@10"] == 1.0 and metrics["latency_ms_p50"] > 0
    items = client.get(f"/v1/evals/{plain['id']}/items").json()
    assert {i["item_key"] for i in items} == {"q1", "q2", "q3"}
    ranked = {i["item_key"]: i["output"]["ranked"] for i in items}
    assert ranked["q2"][0][0] == "disk" and all(isinstance(s, float) for _, s in ranked["q2"])

    # the stored metrics are the library's on the stored rankings
    qrels = {"q1": {"tides": 1}, "q2": {"disk": 2}, "q3": {"bees": 1, "bread": 0}}
    run = {q: {d: float(s) for d, s in r} for q, r in ranked.items()}
    library = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "map"}).evaluate(run)
    ndcg = sum(v["ndcg_cut_10"] for v in library.values()) / 3
    assert metrics["ndcg@10"] == pytest.approx(ndcg, abs=1e-4)
    assert metrics["map"] == pytest.approx(sum(v["map"] for v in library.values()) / 3, abs=1e-4)
    throwaway = plain["config"]["throwaway_collection"]
    assert client.get(f"/v1/collections/{throwaway}").status_code == 404  # dropped after the run

    sweep = create_run(
        client,
        kind="retrieval",
        name="modes",
        dataset={"path": path},
        collection_name="evals-kept",
        sweep={"mode": ["bm25", "dense"], "fusion.method": ["rrf"]},
    )
    sweep = wait_run(client, sweep["id"])
    assert sweep["status"] == "succeeded", sweep
    table = client.get(f"/v1/evals/{sweep['id']}/sweep").json()
    assert [r["label"] for r in table["rows"]] == [
        "mode=bm25,fusion.method=rrf",
        "mode=dense,fusion.method=rrf",
    ]
    assert table["metric"] == "ndcg@10" and any(r["pareto"] for r in table["rows"])
    png = client.get(f"/v1/evals/{sweep['id']}/sweep/plot")
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")
    assert b"<svg" in client.get(f"/v1/evals/{sweep['id']}/sweep/plot?format=svg").content

    cmp = client.get(f"/v1/evals/{plain['id']}/compare/{sweep['id']}").json()
    assert cmp["metric"] == "ndcg@10" and cmp["wins"] + cmp["losses"] + cmp["ties"] == 3
    assert cmp["b"]["variant"] == "mode=bm25,fusion.method=rrf" and "bootstrap_p" in cmp["test"]
    assert cmp["deltas"]["ndcg@10"] == pytest.approx(0.0, abs=1e-6)  # the same bm25 ranking

    # apply: the dense variant becomes the kept collection's setting; searches follow it
    search = {"query": "E-7731 disk error", "debug": True}
    kept = client.get("/v1/collections/evals-kept").json()["id"]
    before = client.post(f"/v1/collections/{kept}/search", json=search).json()
    assert before["debug"]["config"]["mode"] == "hybrid"
    applied = client.post(f"/v1/evals/{sweep['id']}/apply", json={"variant": "mode=dense,fusion.method=rrf"})
    assert applied.status_code == 200, applied.text
    assert client.get("/v1/collections/evals-kept").json()["retrieval"]["mode"] == "dense"
    after = client.post(f"/v1/collections/{kept}/search", json=search).json()
    assert after["debug"]["config"]["mode"] == "dense" and "bm25" not in after["results"][0]["scores"]

    # another tenant sees none of it
    with session_scope(session_factory) as session:
        _, key = create_api_key(session, get_or_create_tenant(session, "evals-other"), "t")
    other = {"authorization": f"Bearer {key}"}
    assert client.get(f"/v1/evals/{plain['id']}", headers=other).status_code == 404
    assert client.get(f"/v1/evals/{sweep['id']}/items", headers=other).status_code == 404
    assert client.delete(f"/v1/evals/{plain['id']}", headers=other).status_code == 404
    assert plain["id"] not in {r["id"] for r in client.get("/v1/evals", headers=other).json()}

    assert client.delete(f"/v1/evals/{plain['id']}").status_code == 204
    assert client.get(f"/v1/evals/{plain['id']}").status_code == 404


def test_refusals_are_clear(client):
    path = upload_dataset(client, beir_files())
    agent = client.post("/v1/evals", json={"kind": "agent", "dataset": {"path": path}})
    assert agent.status_code == 422 and "bfcl" in agent.json()["error"]["message"]
    outside = client.post("/v1/evals", json={"kind": "retrieval", "dataset": {"path": "../../etc"}})
    assert outside.status_code == 404 and "no dataset" in outside.json()["error"]["message"]
    wrong = client.post("/v1/evals", json={"kind": "answer", "dataset": {"path": path, "format": "beir"}})
    assert wrong.status_code == 422
    bad_name = client.post("/v1/evals/datasets", files=[("files", ("../x.jsonl", b"{}"))])
    assert bad_name.status_code == 422
    bad_sweep = client.post(
        "/v1/evals", json={"kind": "retrieval", "dataset": {"path": path}, "sweep": {"fusion.alpha": [3]}}
    )
    assert bad_sweep.status_code == 422
    # Found by schemathesis: a sweep over the limit was a 500 from the estimate.
    too_big = {"kind": "retrieval", "dataset": {"path": path}, "sweep": {"top_k": list(range(1, 66))}}
    for route in ("/v1/evals", "/v1/evals/estimate"):
        refused = client.post(route, json=too_big)
        assert refused.status_code == 422 and "at most 64" in refused.json()["error"]["message"], route
    bad_config = client.patch("/v1/collections/nope", json={"retrieval": {"top_k": 0}})
    assert bad_config.status_code in (404, 422)


def test_broken_dataset_fails_with_a_reason(client, celery_worker):
    path = upload_dataset(client, [("files", ("corpus.jsonl", b'{"_id": "a", "text": "x"}'))])
    run = wait_run(client, create_run(client, kind="retrieval", dataset={"path": path})["id"])
    assert run["status"] == "failed" and "BEIR" in run["error"]


def test_cancel_stops_the_run_and_keeps_finished_items(client, celery_worker):
    from tests.api.test_eval_recovery import _dataset

    path = upload_dataset(client, _dataset())
    run = create_run(
        client, kind="retrieval", dataset={"path": path}, sweep={"mode": ["bm25", "dense", "hybrid"]}
    )
    cancelled = client.post(f"/v1/evals/{run['id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert client.post(f"/v1/evals/{run['id']}/cancel").status_code == 409
    time.sleep(3)  # a worker that held it stops at its next item
    after = client.get(f"/v1/evals/{run['id']}").json()
    assert after["status"] == "cancelled" and after["items_done"] < 120
    assert (
        len(client.get(f"/v1/evals/{run['id']}/items", params={"limit": 1000}).json()) == after["items_done"]
    )
