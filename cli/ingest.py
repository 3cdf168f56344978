"""`groundwork ingest PATH... --collection NAME` and `groundwork jobs show|requeue|cancel JOB`.

These commands talk to the running API over HTTP (`--api-url`, default from settings), so they work
against a remote install and see exactly what API users see; they never touch the database.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cli.http import ApiKey, ApiUrl, check_response, make_client

jobs_app = typer.Typer(help="Inspect, re-queue or cancel ingestion jobs.", no_args_is_help=True)
console = Console()


def collect_files(paths: list[Path]) -> list[Path]:
    """Files given, and every non-hidden file under directories given, sorted."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(
                p
                for p in sorted(path.rglob("*"))
                if p.is_file() and not any(x.startswith(".") for x in p.parts)
            )
        elif path.is_file():
            found.append(path)
        else:
            console.print(f"[red]error:[/red] {path} does not exist")
            raise typer.Exit(2)
    return found


def follow_job(client: httpx.Client, job_id: str, interval: float = 0.5) -> dict:
    """A progress bar over the job's documents until it is finished; returns the final job."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task("queued", total=None)
        while True:
            job = check_response(client.get(f"/v1/jobs/{job_id}"))
            finished = job["documents_done"] + job["documents_failed"]
            stages = ", ".join(f"{k} {v}" for k, v in sorted(job["documents_by_status"].items()))
            progress.update(
                bar,
                total=job["documents_total"],
                completed=finished,
                description=f"{job['status']} | {job['chunks_embedded']} chunks embedded | {stages}",
            )
            if job["status"] not in ("queued", "running"):
                return job
            time.sleep(interval)


def print_summary(client: httpx.Client, upload: dict, job: dict, collection: str) -> None:
    outcomes: dict[str, int] = {}
    for doc in upload["documents"]:
        outcomes[doc["status"]] = outcomes.get(doc["status"], 0) + 1
    table = Table(title=f"job {job['id']} ({job['status']})")
    for column in ("indexed", "failed", "unchanged", "duplicate", "chunks embedded"):
        table.add_column(column, justify="right")
    table.add_row(
        str(job["documents_done"]),
        str(job["documents_failed"]),
        str(outcomes.get("unchanged", 0)),
        str(outcomes.get("duplicate", 0)),
        str(job["chunks_embedded"]),
    )
    console.print(table)
    if job["documents_failed"]:
        failed = check_response(
            client.get(
                f"/v1/collections/{collection}/documents",
                params={"job_id": job["id"], "status": "failed", "limit": 1000},
            )
        )
        for doc in failed["items"]:
            console.print(f"[red]failed[/red] {doc['source_id']}: {doc['error']}")


def ingest(
    paths: list[Path] = typer.Argument(..., help="Files or directories (searched recursively)."),
    collection: str = typer.Option(..., "--collection", "-c", help="Collection name (created if missing)."),
    wait: bool = typer.Option(True, help="Follow the job with a progress bar until it finishes."),
    api_url: str | None = ApiUrl,
    api_key: str | None = ApiKey,
) -> None:
    """Upload files into a collection as one job, follow its progress and print a summary."""
    files = collect_files(paths)
    if not files:
        console.print("nothing to ingest")
        raise typer.Exit(0)
    with make_client(api_url, api_key) as client:
        if client.get(f"/v1/collections/{collection}").status_code == 404:
            check_response(client.post("/v1/collections", json={"name": collection}))
            console.print(f"created collection {collection!r}")
        handles = [path.open("rb") for path in files]
        try:
            # NOTE: the path as given becomes the source id, so re-running the command re-versions.
            parts = [("files", (p.as_posix(), h)) for p, h in zip(files, handles, strict=True)]
            upload = check_response(client.post(f"/v1/collections/{collection}/documents", files=parts))
        finally:
            for handle in handles:
                handle.close()
        console.print(f"job {upload['job_id']}: {len(files)} files sent")
        if not wait:
            return
        job = follow_job(client, upload["job_id"])
        print_summary(client, upload, job, collection)
    if job["documents_failed"]:
        raise typer.Exit(1)


@jobs_app.command("show")
def show(job_id: str, api_url: str | None = ApiUrl, api_key: str | None = ApiKey) -> None:
    """Print a job's status and counters."""
    with make_client(api_url, api_key) as client:
        console.print_json(data=check_response(client.get(f"/v1/jobs/{job_id}")))


@jobs_app.command("requeue")
def requeue(job_id: str, api_url: str | None = ApiUrl, api_key: str | None = ApiKey) -> None:
    """Queue again every document of the job that is not indexed (stuck, failed or cancelled)."""
    with make_client(api_url, api_key) as client:
        job = check_response(client.post(f"/v1/jobs/{job_id}/requeue"))
        console.print(f"job {job_id}: {job['documents_total'] - job['documents_done']} documents re-queued")


@jobs_app.command("cancel")
def cancel(job_id: str, api_url: str | None = ApiUrl, api_key: str | None = ApiKey) -> None:
    """Cancel a job: its unfinished documents fail with reason 'cancelled'."""
    with make_client(api_url, api_key) as client:
        job = check_response(client.post(f"/v1/jobs/{job_id}/cancel"))
        console.print(f"job {job_id}: {job['status']}, {job['documents_failed']} documents not indexed")
