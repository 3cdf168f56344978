"""`groundwork up` on a fresh data dir, as the README's run command does: embedded database,
migrations, a supervised worker on the database broker (restarted when killed), the API, the demo
corpus, and a clean stop."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from tests.support.services import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_up_serves_ready_api_answers_the_demo_question_and_stops_cleanly(settings):
    data_dir = Path(tempfile.mkdtemp(prefix="groundwork-up-"))
    data_dir.chmod(0o755)  # pgserver's postgres user must reach it
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDWORK_")} | {
        "GROUNDWORK_DATA_DIR": str(data_dir),
        "GROUNDWORK_MODEL_CACHE_DIR": str(settings.model_cache_dir),
        "GROUNDWORK_API_PORT": str(port),
        "GROUNDWORK_CELERY_QUEUE": f"up-{port}",
        "GROUNDWORK_LOG_LEVEL": "WARNING",
    }
    log = (data_dir / "up.log").open("w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "up"], env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 600  # NOTE: readiness waits for the worker (slow on a busy box)
        while "Try:" not in (out := (data_dir / "up.log").read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, out[-3000:]
            time.sleep(1)
        assert httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200
        ask_line = next(line for line in out.splitlines() if "groundwork ask" in line).strip()
        question = ask_line.split('"')[1]
        answer = subprocess.run(
            [sys.executable, "-m", "cli.main", "ask", question, "--collection", "groundwork-docs"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert answer.returncode == 0, answer.stdout + answer.stderr
        assert "16" in answer.stdout and "inference-engine.md" in answer.stdout
        # a killed worker is started again, and /readyz follows it
        pid_file = data_dir / "worker.pid"
        first = int(pid_file.read_text())
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 300
        while True:
            ready = httpx.get(f"http://127.0.0.1:{port}/readyz")
            if int(pid_file.read_text()) != first and ready.status_code == 200:
                break
            assert time.monotonic() < deadline, (ready.text, (data_dir / "up.log").read_text()[-3000:])
            time.sleep(1)
        assert ready.json()["checks"]["worker"] == "ok"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        log.close()
    time.sleep(1)
    leftover = subprocess.run(["pgrep", "-f", str(data_dir)], capture_output=True, text=True).stdout
    assert leftover == "", "embedded postgres or worker still running after up stopped"
    shutil.rmtree(data_dir, ignore_errors=True)


def test_up_with_keys_required_says_what_to_do_instead_of_ready(broker_settings, celery_worker, capsys):
    from fastapi.testclient import TestClient

    from api.main import create_app
    from cli.demo import seed_demo
    from tests.support.http import running

    app = create_app(broker_settings.model_copy(update={"auth_required": True}))
    with TestClient(app), running(app) as base:
        seed_demo(base, auth_required=True)
    out = capsys.readouterr().out
    assert "groundwork keys create" in out and "not ingested" in out
    assert "Ready" not in out and "Try:" not in out and "groundwork ask" not in out
