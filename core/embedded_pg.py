"""The embedded default: a PostgreSQL 16 + pgvector server from the `pgserver` package, with its
data under the user's data dir so that it is reused across runs.
"""

from __future__ import annotations

import json
import logging
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
