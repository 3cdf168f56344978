"""The embedded default: a PostgreSQL 16 + pgvector server from the `pgserver` package, with its
data under the user's data dir so that it is reused across runs.
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)


def start_embedded_postgres(data_dir: Path, database: str = "groundwork") -> tuple[str, object]:
    """Start (or attach to) the embedded server; return its URL for `database` and the server handle.

    NOTE: pgserver stops the server when the last process holding a handle exits, so the caller
    keeps the handle alive for as long as the platform runs (children connect by URL only).
    """
    import pgserver  # local import: only the embedded default needs it

    pgdata = data_dir / "pgdata"
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(str(pgdata), cleanup_mode="stop")
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{database}';")
    if "(1 row)" not in exists:
        server.psql(f'CREATE DATABASE "{database}";')
    base = server.get_uri()  # postgresql://postgres:@/postgres?host=<socket dir>
    url = base.replace("/postgres?", f"/{database}?", 1)
    log.info("embedded postgres at %s", url)
    return url, server
