"""The embedded default restarts a Postgres stopped under load (fast shutdown); while it is down the
API answers 503 + Retry-After, and once it is back the same API process answers again."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from pgserver._commands import pg_ctl

from api.main import build_state, create_app
from cli.db import upgrade_database
from core.embedded_pg import Supervisor
from core.runtime import open_database
from tests.support.http import running

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CLIENTS = 4


def _load(base: str, results: list, stop: threading.Event) -> None:
    with httpx.Client(base_url=base, timeout=15) as client:
        while not stop.is_set():
            resp = client.get("/v1/collections")
            results.append((time.monotonic(), resp.status_code, resp.headers.get("retry-after")))


def test_postgres_stopped_under_load_is_restarted_and_the_api_recovers(settings):
    # Its own server: stopping the session's would break the other tests.
    data_dir = Path(tempfile.mkdtemp(prefix="groundwork-test-restart-"))
    data_dir.chmod(0o755)  # pgserver runs postgres as its own user when run as root
    local = settings.model_copy(update={"database_url": None, "data_dir": data_dir})
    database = open_database(local)
    state = None
    try:
        upgrade_database(database.url)
        state = build_state(local.model_copy(update={"database_url": database.url}), database)
        # NOTE: a slower pulse than the default second, so that the outage lasts long enough to be
        # seen by the clients whatever the timing of the stop.
        supervisor = Supervisor(database.server, interval_s=2.0).start()
        database.supervisor = supervisor
        results: list[tuple[float, int, str | None]] = []
        stop = threading.Event()
        app = create_app(local, state)
        with TestClient(app), running(app) as base:  # the test client runs the app's lifespan
            clients = [threading.Thread(target=_load, args=(base, results, stop)) for _ in range(CLIENTS)]
            for thread in clients:
                thread.start()
            time.sleep(1.0)
            server = database.server
            pg_ctl(["-m", "fast", "-w", "stop"], pgdata=server.pgdata, user=server.system_user)
            stopped_at = time.monotonic()
            while not supervisor.running():
                assert time.monotonic() - stopped_at < 30, "the supervisor did not restart postgres"
                time.sleep(0.05)
            back_at = time.monotonic()
            while not any(t > back_at and status == 200 for t, status, _ in list(results)):
                assert time.monotonic() - back_at < 10, "the API did not answer within 10 s of postgres"
                time.sleep(0.05)
            time.sleep(0.5)
            stop.set()
            for thread in clients:
                thread.join(timeout=30)
        recovered_at = min(t for t, status, _ in results if t > back_at and status == 200)
        outage = [(status, retry) for t, status, retry in results if stopped_at < t < back_at]
        assert {status for _, status, _ in results} <= {200, 503}, sorted({s for _, s, _ in results})
        assert all(retry and retry.isdigit() for status, retry in (r[1:] for r in results) if status == 503)
        assert any(status == 503 for status, _ in outage), "no request saw the outage"
        assert supervisor.restarts == 1
        print(
            f"\n{len(results)} requests, {CLIENTS} clients; postgres down {back_at - stopped_at:.1f} s "
            f"({sum(s == 503 for s, _ in outage)} answers 503 + Retry-After, no other error); "
            f"first 200 {recovered_at - back_at:.2f} s after postgres was back"
        )
    finally:
        if state is not None:
            state.engine.dispose()
        database.close()
        shutil.rmtree(data_dir, ignore_errors=True)
