"""The demo corpus: on a fresh install, `groundwork up` ingests these pages (our own docs) so that
the printed `groundwork ask` line answers from them straight away."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import typer

DEMO_DIR = Path(__file__).parent / "demo"
DEMO_COLLECTION = "groundwork-docs"
DEMO_QUESTION = "How many tokens does a KV cache block hold by default?"


def wait_ready(client: httpx.Client, timeout: float = 300) -> None:
    """Until the API is ready, but for the worker: uploads queue until it comes (a worker can take
    minutes to start on a busy machine)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            resp = client.get("/readyz")
            if resp.status_code == 200:
                return
            checks = resp.json().get("error", {}).get("details") or {}
            if checks and all(v == "ok" for k, v in checks.items() if k != "worker"):
                return
        except (httpx.TransportError, ValueError):
            pass
        time.sleep(0.5)
    raise TimeoutError("the API did not become ready")


def seed_demo(base_url: str, auth_required: bool = False) -> None:
    """Ingest the demo corpus if the default tenant has no collection; print how to try it.
    With API keys required there is no key to ingest it with: say what to do instead."""
    with httpx.Client(base_url=base_url, timeout=300) as client:
        wait_ready(client)
        if auth_required:
            typer.secho(
                f"Serving at {base_url} with API keys required; the demo corpus was not ingested. "
                "Next: create a key (`groundwork keys create <name> --tenant <tenant>`), then create a "
                "collection and upload documents with it (Authorization: Bearer <key>).",
                fg="yellow",
            )
            return
        if client.get("/v1/collections").json():
            typer.secho(f"Ready at {base_url}", fg="green")
            return
        typer.echo(f"First start: ingesting the demo corpus into collection {DEMO_COLLECTION!r}...")
        client.post("/v1/collections", json={"name": DEMO_COLLECTION, "description": "Groundwork's own docs"})
        files = [("files", (p.name, p.read_bytes(), "text/markdown")) for p in sorted(DEMO_DIR.glob("*.md"))]
        job_id = client.post(f"/v1/collections/{DEMO_COLLECTION}/documents", files=files).json()["job_id"]
        while (job := client.get(f"/v1/jobs/{job_id}").json())["status"] in ("queued", "running"):
            time.sleep(0.5)
        typer.secho(
            f"Demo corpus {job['status']}: {job['documents_done']} documents indexed. Try:", fg="green"
        )
        typer.echo(f'  .venv/bin/groundwork ask "{DEMO_QUESTION}" --collection {DEMO_COLLECTION}')
        typer.echo(
            f"  curl -s {base_url}/v1/ask -H 'content-type: application/json' "
            f'-d \'{{"collection": "{DEMO_COLLECTION}", "question": "{DEMO_QUESTION}"}}\''
        )
