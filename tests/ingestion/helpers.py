"""Helpers shared by the ingestion tests: upload through the API and wait for the job."""

from __future__ import annotations

import time


def upload(client, collection: str, files: dict[str, bytes]) -> dict:
    response = client.post(
        f"/v1/collections/{collection}/documents",
        files=[("files", (name, data, "application/octet-stream")) for name, data in files.items()],
    )
    assert response.status_code == 202, response.text
    return response.json()


def wait_job(client, job_id: str, timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] not in ("queued", "running"):
            return job
        time.sleep(0.3)
    raise TimeoutError(f"job {job_id} still {job['status']} after {timeout}s: {job}")


def create_collection(client, name: str, **body) -> dict:
    response = client.post("/v1/collections", json={"name": name, **body})
    assert response.status_code == 201, response.text
    return response.json()
