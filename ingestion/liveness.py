"""Whether a worker is alive, without a broker round trip: every worker's main process holds a
shared Postgres advisory lock on a connection of its own for as long as it runs; `/readyz` counts
the holders in `pg_locks`. A killed worker's connection closes with it and its lock goes at once.
The lock is per queue (`celery_queue`).

NOTE: a task-based ping would wait behind a busy worker (a long document) and call it dead, and
the SQLAlchemy broker transport supports no Celery remote control.
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy import Connection, Engine, text

log = logging.getLogger(__name__)
_KEY = "hashtextextended(:name, 0)"


def _name(queue: str) -> str:
    return f"groundwork-worker:{queue}"


# A bigint advisory key shows in pg_locks as classid (high 32 bits) and objid (low 32 bits).
_HOLDERS = text(
    f"""
    SELECT count(*) FROM pg_locks l, (SELECT {_KEY} AS k) h
    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted AND l.mode = 'ShareLock'
      AND l.classid::text::bigint = ((h.k >> 32) & 4294967295)
      AND l.objid::text::bigint = (h.k & 4294967295)
    """
)


def workers_alive(engine: Engine, queue: str) -> int:
    """How many workers of `queue` hold their lock now."""
    with engine.connect() as conn:
        return int(conn.execute(_HOLDERS, {"name": _name(queue)}).scalar_one())


class AliveLock(threading.Thread):
    """Holds the worker's shared lock; re-takes it after the database restarts."""

    def __init__(self, engine: Engine, queue: str, check_every_s: float = 5.0) -> None:
        super().__init__(name="worker-alive-lock", daemon=True)
        self._engine, self._name, self._every = engine, _name(queue), check_every_s
        self._stopping = threading.Event()
        self._conn: Connection | None = None

    def run(self) -> None:
        while True:
            try:
                if self._conn is None:
                    self._conn = self._engine.connect()
                    self._conn.execute(text(f"SELECT pg_advisory_lock_shared({_KEY})"), {"name": self._name})
                    self._conn.commit()  # the session-level lock outlives the transaction
                else:
                    self._conn.execute(text("SELECT 1")).scalar()
                    self._conn.commit()
            except Exception:  # the database restarts: take the lock again on a new connection
                log.warning("worker liveness lock lost; taking it again", exc_info=True)
                self._drop()
            if self._stopping.wait(self._every):
                self._drop()
                return

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.invalidate()
                self._conn.close()
            except Exception:
                pass
            self._conn = None

    def stop(self) -> None:
        self._stopping.set()
