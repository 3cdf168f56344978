"""The embedded default: a PostgreSQL 16 + pgvector server from the `pgserver` package, with its
data under the user's data dir so that it is reused across runs.
"""

from __future__ import annotations

import atexit
import json
import logging
import threading
import time
from pathlib import Path

import psutil

log = logging.getLogger(__name__)


def start_embedded_postgres(data_dir: Path, database: str = "groundwork") -> tuple[str, object]:
    """Start (or attach to) the embedded server; return its URL for `database` and the server handle.

    NOTE: pgserver stops the server when the last process holding a handle exits, so the caller
    keeps the handle alive for as long as the platform runs (children connect by URL only).
    """
    import pgserver  # local import: only the embedded default needs it

    pgdata = data_dir / "pgdata"
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    _forget_dead_handles(pgdata)
    server = _get_server(pgserver, pgdata)
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{database}';")
    if "(1 row)" not in exists:
        server.psql(f'CREATE DATABASE "{database}";')
    base = server.get_uri()  # postgresql://postgres:@/postgres?host=<socket dir>
    url = base.replace("/postgres?", f"/{database}?", 1)
    log.info("embedded postgres at %s", url)
    return url, server


def _forget_dead_handles(pgdata: Path) -> None:
    """Drop pids of processes that died without releasing their handle (SIGKILL, power loss).

    NOTE: pgserver stops the server only when the last handle in `.handle_pids.json` is released;
    a dead process left in that list would keep the server running forever after the real last one.
    """
    handles = pgdata / ".handle_pids.json"
    if not handles.exists():
        return
    pids = json.loads(handles.read_text() or "[]")
    alive = [pid for pid in pids if psutil.pid_exists(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


def _get_server(pgserver, pgdata: Path, attempts: int = 10):
    """pgserver asserts the server is ready right after starting it; after an unclean stop,
    PostgreSQL first replays its WAL and is not ready yet, so retry for a few seconds."""
    for attempt in range(attempts):
        try:
            return pgserver.get_server(str(pgdata), cleanup_mode="stop")
        except AssertionError:
            if attempt == attempts - 1:
                raise
            pgserver.PostgresServer._instances.pop(pgdata, None)
            time.sleep(1)


class Supervisor:
    """Restarts the embedded server when it stops under the platform (a crash, an OOM kill, an
    operator's `pg_ctl stop`): checks every `interval_s`, restarts with the same data and socket.

    The API answers 503 + Retry-After while the server is down and reconnects by itself once it is
    back (the engine's pool pre-pings its connections); nothing else needs restarting.

    NOTE: `stop()` must run before the handle's cleanup stops the server on purpose, or the
    supervisor would start it again: `DatabaseHandle.close` and (atexit runs handlers last-registered
    first) the exit hook registered here see to that.
    """

    def __init__(self, server, interval_s: float = 1.0) -> None:
        self.server, self.interval_s = server, interval_s
        self.restarts = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="embedded-pg-supervisor", daemon=True)
        atexit.register(self.stop)

    def start(self) -> Supervisor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)

    def running(self) -> bool:
        from pgserver.utils import PostmasterInfo

        try:
            info = PostmasterInfo.read_from_pgdata(self.server.pgdata)
        except (AssertionError, ValueError, OSError):
            # NOTE: postgres writes postmaster.pid a line at a time as it starts (and removes it as
            # it stops); read in between, the file is short or gone and pgserver's parser raises.
            # Either way the server is not ready, which is all this answers.
            return False
        return info is not None and info.is_running() and info.status == "ready"

    def _watch(self) -> None:
        while not self._stopping.wait(self.interval_s):
            if self.running():
                continue
            log.warning("embedded postgres is not running: restarting it")
            try:
                with self.server._lock:  # pgserver's inter-process lock: one restarter at a time
                    if not self._stopping.is_set():
                        self.server.ensure_postgres_running()
                        self.restarts += 1
                log.warning("embedded postgres restarted")
            except Exception:  # still down (e.g. recovering after a crash): try again next round
                log.exception("restarting embedded postgres failed")
