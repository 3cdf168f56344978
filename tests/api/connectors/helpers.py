from __future__ import annotations

import time


def sync_and_wait(client, connector_id: str, timeout: float = 240) -> dict:
    response = client.post(f"/v1/connectors/{connector_id}/sync")
    assert response.status_code == 202, response.text
    return wait_sync(client, connector_id, response.json()["id"], timeout)


def wait_sync(client, connector_id: str, sync_id: str, timeout: float = 240) -> dict:
    """The finished sync, once its ingestion job (if any) is finished too."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        syncs = {s["id"]: s for s in client.get(f"/v1/connectors/{connector_id}/syncs").json()}
        sync = syncs.get(sync_id)
        if sync and sync["status"] in ("succeeded", "failed"):
            if not sync["job_id"]:
                return sync
            job = client.get(f"/v1/jobs/{sync['job_id']}").json()
            if job["status"] not in ("queued", "running"):
                return sync
        time.sleep(0.3)
    raise TimeoutError(f"sync {sync_id} not finished after {timeout}s")


def documents(client, collection: str) -> dict[str, dict]:
    items = client.get(f"/v1/collections/{collection}/documents").json()["items"]
    return {d["source_id"]: d for d in items}


def search_sources(client, collection_id: str, query: str, mode: str = "bm25") -> list[str]:
    response = client.post(f"/v1/collections/{collection_id}/search", json={"query": query, "mode": mode})
    assert response.status_code == 200, response.text
    return [r["source_id"] for r in response.json()["results"]]
