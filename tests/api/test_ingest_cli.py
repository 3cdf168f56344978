"""`groundwork ingest` against the API (in-process TestClient) and a real worker."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import cli.ingest
from cli.main import app
from tests.ingestion.helpers import wait_job
from tests.ingestion.samples import mixed_folder

pytestmark = [pytest.mark.integration, pytest.mark.slow]


class _Unclosed:
    """The session's TestClient, which the command must not close."""

    def __init__(self, client) -> None:
        self.client = client

    def __enter__(self):
        return self.client

    def __exit__(self, *exc) -> None:
        return None


def test_ingest_command_follows_job_and_summarises(client, celery_worker, tmp_path, monkeypatch):
    folder = tmp_path / "docs"
    folder.mkdir()
    for name in ("guide.md", "notes.txt", "broken.pdf"):
        (folder / name).write_bytes(mixed_folder()[name])
    monkeypatch.setattr(cli.ingest, "make_client", lambda *_: _Unclosed(client))
    result = CliRunner().invoke(app, ["ingest", str(folder), "--collection", "cli-docs"])
    assert result.exit_code == 1, result.output  # one document failed
    output = " ".join(result.output.split())  # rich wraps long lines
    assert "created collection 'cli-docs'" in output
    assert "succeeded" in output
    assert "broken.pdf: corrupt_file: corrupt PDF" in output
    docs = client.get("/v1/collections/cli-docs/documents").json()
    assert sorted(d["status"] for d in docs["items"]) == ["failed", "indexed", "indexed"]

    job_id = docs["items"][0]["job_id"]
    result = CliRunner().invoke(app, ["jobs", "requeue", job_id])
    assert result.exit_code == 0 and "1 documents re-queued" in result.output, result.output
    job = wait_job(client, job_id)
    assert (job["documents_done"], job["documents_failed"], job["attempts"]) == (2, 1, 1)
    result = CliRunner().invoke(app, ["jobs", "cancel", job_id])
    assert result.exit_code == 2 and "already" in result.output, result.output
