"""Corrupt, empty, huge, zip-bomb and unsupported files in one batch: each fails with its reason
code, the rest are indexed, and neither the API nor the worker balloons."""

from __future__ import annotations

import contextlib
import threading

import psutil
import pytest

from tests.ingestion.helpers import create_collection, upload, wait_job
from tests.ingestion.samples import make_docx, zip_bomb_docx

pytestmark = [pytest.mark.integration, pytest.mark.slow]


class PeakRss(threading.Thread):
    """Samples the summed RSS of a process tree until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.root, self.peak, self.stop = psutil.Process(pid), 0, threading.Event()

    def rss(self) -> int:
        procs = [self.root, *self.root.children(recursive=True)]
        return sum(p.memory_info().rss for p in procs if p.is_running())

    def run(self) -> None:
        while not self.stop.wait(0.05):
            with contextlib.suppress(psutil.Error):
                self.peak = max(self.peak, self.rss())


def test_bad_files_fail_with_reasons_and_the_rest_are_indexed(client, celery_worker, settings):
    huge = b"x" * int(settings.ingestion.max_file_mb * 1e6 + 1_000_000)
    files = {
        "good-1.txt": b"Otters hold hands while they sleep so they do not drift apart.",
        "corrupt.pdf": b"%PDF-1.7\n" + b"\x00garbage" * 500,
        "empty.txt": b"",
        "blank.md": b"   \n\n  ",
        "huge.txt": huge,
        "bomb.docx": zip_bomb_docx(),
        "photo.png": b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 20,
        "good-2.docx": make_docx({"Beavers": ["Beavers build dams from branches and mud."]}),
    }
    expected = {
        "corrupt.pdf": "corrupt_file",
        "empty.txt": "empty_file",
        "blank.md": "empty_file",
        "huge.txt": "file_too_large",
        "bomb.docx": "unpacked_too_large",
        "photo.png": "unsupported_type",
    }
    create_collection(client, "bad-batch")
    worker = PeakRss(celery_worker.proc.pid)
    api = PeakRss(psutil.Process().pid)
    idle_worker, idle_api = worker.rss(), api.rss()
    worker.start()
    api.start()
    try:
        job = wait_job(client, upload(client, "bad-batch", files)["job_id"])
    finally:
        worker.stop.set()
        api.stop.set()
    del huge
    docs = {d["source_id"]: d for d in client.get("/v1/collections/bad-batch/documents").json()["items"]}
    for name, code in expected.items():
        assert docs[name]["status"] == "failed" and docs[name]["error"].startswith(f"{code}: "), docs[name]
        assert "Error" not in docs[name]["error"]  # no exception class names or tracebacks
    assert docs["good-1.txt"]["status"] == docs["good-2.docx"]["status"] == "indexed"
    assert (job["documents_done"], job["documents_failed"]) == (2, len(expected))
    grew_worker, grew_api = worker.peak - idle_worker, api.peak - idle_api
    print(
        f"peak RSS above idle: worker {grew_worker / 1e6:.0f} MB, API (test process) {grew_api / 1e6:.0f} MB"
    )
    assert grew_worker < 1e9 and grew_api < 1e9
