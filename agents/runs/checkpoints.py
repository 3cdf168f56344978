"""LangGraph's Postgres checkpointer on the platform database, built for long runs.

- Connections come from a pool that checks each one when handed out (`check_connection`), so a
  connection the server or a proxy dropped while an LLM call took minutes is replaced, not used;
  the runner also retries a step that failed with `OperationalError`, resuming from the last checkpoint.
- Retention: a finished run's checkpoints are deleted (its `agent_runs` row keeps the trace and
  the answer); `prune_finished` sweeps any that a crash left behind.
"""

from __future__ import annotations

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool
from sqlalchemy import text
from sqlalchemy.orm import Session

POOL_MAX = 8
_SETUP_LOCK = "groundwork.checkpoint_setup"


def psycopg_url(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


async def open_checkpointer(database_url: str) -> tuple[AsyncConnectionPool, AsyncPostgresSaver]:
    pool = AsyncConnectionPool(
        psycopg_url(database_url),
        min_size=1,
        max_size=POOL_MAX,
        # NOTE: the saver needs autocommit and dict rows; prepared statements break behind pgbouncer.
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        check=AsyncConnectionPool.check_connection,
        open=False,
    )
    try:
        await pool.open(wait=True, timeout=30)
        saver = AsyncPostgresSaver(pool)
        # NOTE: one process at a time: two API processes (or runners) migrating the tables at once
        # failed with a unique violation on the saver's version table, or deadlocked. A session
        # lock, not a transaction one: the saver builds its indexes CONCURRENTLY, which waits for
        # every open transaction, the lock's included. A set-up cut short leaves it held on a
        # pooled connection; closing the pool (below, and at shutdown) releases it.
        async with pool.connection() as conn:
            await conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (_SETUP_LOCK,))
            try:
                await saver.setup()  # creates or migrates the checkpoint tables (its own version table)
            finally:
                await conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (_SETUP_LOCK,))
    except BaseException:
        await pool.close()
        raise
    return pool, saver


def prune_finished(session: Session) -> int:
    """Delete the checkpoints of finished runs; returns how many runs had some (none before the
    first run made the checkpointer create its tables)."""
    if session.execute(text("SELECT to_regclass('checkpoint_writes')")).scalar() is None:
        return 0
    rows = (
        session.execute(
            text(
                "SELECT DISTINCT c.thread_id FROM checkpoints c "
                "JOIN agent_runs r ON r.id::text = c.thread_id "
                "WHERE r.status IN ('completed', 'failed', 'cancelled')"
            )
        )
        .scalars()
        .all()
    )
    for table in ("checkpoint_writes", "checkpoint_blobs", "checkpoints"):
        session.execute(text(f"DELETE FROM {table} WHERE thread_id = ANY(:ids)"), {"ids": list(rows)})
    return len(rows)
