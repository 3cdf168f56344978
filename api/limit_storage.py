"""A Postgres storage for the `limits` library, so that every API process of a deployment without
Redis shares one set of rate-limit counters (the library ships none for Postgres).

Tables of migration 0010: `rate_limit_counters` (fixed and sliding-window counters, one row a key
and window) and `rate_limit_entries` (one row an admitted hit of a moving window).

NOTE: no two API processes can both take the last unit of a window. A moving-window hit takes a
transaction-level advisory lock on its key, then counts and adds its entries in one statement (two
round trips); a sliding-window hit is one conditional upsert that re-checks the row it locks (one
round trip, was three with the lock and a read). Times are this host's epoch seconds, as the
library's window keys are.

One request's checks (about eight calls of the library: each scope's windows, then its headers) run
in one transaction (`pinned`), not one checkout, pre-ping and commit each: under load every round
trip is a wait for the interpreter lock too. A refusal rolls back the request's earlier hits. Inside
it the windows read or taken are remembered until the next write to them (a sliding-window hit
returns the window it wrote), so the `x-ratelimit-*` headers cost no statement of their own, and a
settlement's refund is one statement for all its counters: the limiter's round trips were most of
what another tenant's ask waited on under a flood (`python -m benchmarks.fairness`, limits off
against on).
The storage has its own small engine whose commits do not wait for the WAL flush
(`synchronous_commit=off`): a crash may forget the last fraction of a second of counts, which a
rate limit can afford, while an admitted request no longer waits for fsyncs (under a flood, on the
disk other tenants' answers use).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from limits.storage import MovingWindowSupport, SlidingWindowCounterSupport, Storage
from limits.storage.base import TimestampedSlidingWindow
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import SQLAlchemyError

from core.database import make_engine

# Expired rows are deleted by whichever call comes this long after the last purge.
PURGE_EVERY_S = 60.0

_LOCK = text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))")
_INCR = text(
    """
    INSERT INTO rate_limit_counters AS c (key, count, expires_at) VALUES (:key, :amount, :now + :expiry)
    ON CONFLICT (key) DO UPDATE SET
      count = CASE WHEN c.expires_at <= :now THEN :amount ELSE c.count + :amount END,
      expires_at = CASE WHEN c.expires_at <= :now THEN :now + :expiry ELSE c.expires_at END
    RETURNING count
    """
)
_GET = text("SELECT count, expires_at FROM rate_limit_counters WHERE key = :key AND expires_at > :now")
_WINDOW = text("SELECT count(*), min(at) FROM rate_limit_entries WHERE key = :key AND at > :now - :expiry")

# After `_LOCK` (so that this statement's snapshot holds every hit committed before it): the
# window's count, its expired entries deleted and, if there is room, `n` entries added; one round trip.
_TAKE = text(
    """
    WITH taken AS (
      SELECT count(*) AS n, min(at) AS oldest FROM rate_limit_entries WHERE key = :key AND at > :now - :expiry
    ),
    expired AS (DELETE FROM rate_limit_entries WHERE key = :key AND at <= :now - :expiry),
    added AS (
      INSERT INTO rate_limit_entries (key, at)
      SELECT :key, :now FROM taken, generate_series(1, :n) WHERE taken.n + :n <= :limit
    )
    SELECT n + :n <= :limit, n, oldest FROM taken
    """
)
# A sliding-window hit in one statement, without the advisory lock: the current window's row is
# written only if the previous window's weighted count plus the current one leaves room. NOTE: the
# conflict branch re-reads the row it locks (the latest committed count), so two concurrent hits
# cannot both take the last unit; the previous window is read from the statement's snapshot, which
# is safe because a closed window is never written again. Returns a row only when admitted.
_SLIDE = text(
    """
    WITH counted AS (
      SELECT coalesce(
        (SELECT count FROM rate_limit_counters WHERE key = :previous_key AND expires_at > :now), 0
      ) AS count
    ),
    previous AS (SELECT count, count::float8 * :previous_ttl / :expiry AS weighted FROM counted)
    INSERT INTO rate_limit_counters AS c (key, count, expires_at)
    SELECT :key, :amount, :now + 2 * :expiry FROM previous WHERE floor(weighted) + :amount <= :limit
    ON CONFLICT (key) DO UPDATE SET
      count = CASE WHEN c.expires_at <= :now THEN :amount ELSE c.count + :amount END,
      expires_at = CASE WHEN c.expires_at <= :now THEN :now + 2 * :expiry ELSE c.expires_at END
    WHERE floor((SELECT weighted FROM previous)
                + CASE WHEN c.expires_at <= :now THEN 0 ELSE c.count END) + :amount <= :limit
    RETURNING count, (SELECT count FROM previous)
    """
)
# Tokens given back to the current windows of sliding-window counters, each at most down to zero:
# one statement for every counter of a settlement.
_REFUND = text(
    """
    UPDATE rate_limit_counters AS c SET count = c.count - least(r.cost, c.count)
    FROM unnest(CAST(:keys AS text[]), CAST(:costs AS bigint[])) AS r(key, cost)
    WHERE c.key = r.key AND c.expires_at > :now
    """
)


class PostgresStorage(Storage, MovingWindowSupport, SlidingWindowCounterSupport, TimestampedSlidingWindow):
    """`limits` storage on the platform's own database (its SQLAlchemy engine)."""

    STORAGE_SCHEME = None  # built from an engine, never from a URL

    def __init__(self, engine: Engine) -> None:
        super().__init__()
        self.engine = make_engine(
            engine.url.render_as_string(hide_password=False),
            pool_size=4,
            max_overflow=16,
            connect_args={"options": "-c synchronous_commit=off"},
        )
        self._purged = 0.0
        self._pinned: ContextVar[Connection | None] = ContextVar("limit_connection", default=None)
        # The pinned transaction's windows as last read or taken: ("moving" | "sliding", key) -> window.
        self._seen: ContextVar[dict | None] = ContextVar("limit_windows", default=None)

    @contextmanager
    def pinned(self) -> Iterator[None]:
        """Run the calls made inside in one transaction, committed at the end (rolled back on error)."""
        if self._pinned.get() is not None:
            yield
            return
        with self.engine.begin() as conn:
            token, seen = self._pinned.set(conn), self._seen.set({})
            try:
                yield
            finally:
                self._pinned.reset(token)
                self._seen.reset(seen)

    def _recall(self, kind: str, key: str) -> tuple | None:
        seen = self._seen.get()
        return None if seen is None else seen.get((kind, key))

    def _note(self, kind: str, key: str, window: tuple) -> None:
        if (seen := self._seen.get()) is not None:
            seen[(kind, key)] = window

    def _forget(self, key: str | None = None) -> None:
        """A write to `key`'s window (None: to any counter) makes what was read of it stale."""
        if (seen := self._seen.get()) is None:
            return
        if key is None:
            seen.clear()
        for kind in ("moving", "sliding"):
            seen.pop((kind, key), None)

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _transaction(self) -> Iterator[Connection]:
        conn = self._pinned.get()
        if conn is None:
            with self.engine.begin() as conn:
                yield conn
        else:
            yield conn

    @property
    def base_exceptions(self) -> type[Exception]:
        return SQLAlchemyError

    def _begin(self):
        now = time.time()
        if now - self._purged > PURGE_EVERY_S:
            self._purged = now
            self._purge(now)
        return self._transaction(), now

    def _purge(self, now: float) -> None:
        with self._transaction() as conn:
            conn.execute(text("DELETE FROM rate_limit_counters WHERE expires_at <= :now"), {"now": now})
            # Entries older than the longest window anyone uses (a day) count for no limit.
            conn.execute(text("DELETE FROM rate_limit_entries WHERE at <= :now - 86400"), {"now": now})

    # -- counters (fixed window, and the two windows of a sliding-window counter) --

    def incr(self, key: str, expiry: float, amount: int = 1) -> int:
        begin, now = self._begin()
        with begin as conn:
            return self._incr(conn, key, expiry, amount, now)

    def _incr(self, conn: Connection, key: str, expiry: float, amount: int, now: float) -> int:
        self._forget()  # a raw counter: any window's may be among them
        params = {"key": key, "amount": amount, "now": now, "expiry": expiry}
        return int(conn.execute(_INCR, params).scalar_one())

    def get(self, key: str) -> int:
        begin, now = self._begin()
        with begin as conn:
            row = conn.execute(_GET, {"key": key, "now": now}).first()
        return int(row[0]) if row else 0

    def get_expiry(self, key: str) -> float:
        begin, now = self._begin()
        with begin as conn:
            row = conn.execute(_GET, {"key": key, "now": now}).first()
        return float(row[1]) if row else now

    def check(self) -> bool:
        try:
            with self.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            return True
        except SQLAlchemyError:
            return False

    def reset(self) -> int | None:
        self._forget()
        with self.engine.begin() as conn:
            counters = conn.execute(text("DELETE FROM rate_limit_counters")).rowcount
            entries = conn.execute(text("DELETE FROM rate_limit_entries")).rowcount
        return counters + entries

    def clear(self, key: str) -> None:
        self._forget()  # `key` may be one of a sliding window's two counters
        with self.engine.begin() as conn:
            conn.execute(text("DELETE FROM rate_limit_counters WHERE key = :key"), {"key": key})
            conn.execute(text("DELETE FROM rate_limit_entries WHERE key = :key"), {"key": key})

    # -- moving window: one entry an admitted hit --

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        if amount > limit:
            return False
        begin, now = self._begin()
        with begin as conn:
            conn.execute(_LOCK, {"key": key})
            params = {"key": key, "now": now, "expiry": expiry, "n": amount, "limit": limit}
            admitted, before, oldest = conn.execute(_TAKE, params).one()
        count = int(before) + amount if admitted else int(before)
        self._note("moving", key, (float(oldest) if before else now, count))
        return bool(admitted)

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        if (window := self._recall("moving", key)) is not None:
            return window
        begin, now = self._begin()
        with begin as conn:
            taken, oldest = conn.execute(_WINDOW, {"key": key, "now": now, "expiry": expiry}).one()
        window = (float(oldest), int(taken)) if taken else (now, 0)
        self._note("moving", key, window)
        return window

    # -- sliding-window counter: the previous window's count, weighted by how much of it is left --

    def acquire_sliding_window_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        if amount > limit:
            return False
        begin, now = self._begin()
        previous_key, current_key = self.sliding_window_keys(key, expiry, now)
        params = {
            "key": current_key,
            "previous_key": previous_key,
            "previous_ttl": _previous_ttl(now, expiry),
            "expiry": expiry,
            "now": now,
            "amount": amount,
            "limit": limit,
        }
        self._forget(key)
        with begin as conn:
            # Twice the window: the counter is still read as the previous window during the next one.
            row = conn.execute(_SLIDE, params).first()
        if row is None:
            return False
        current, previous = int(row[0]), int(row[1])
        self._note("sliding", key, _sliding(previous, current, expiry, now))
        return True

    def get_sliding_window(self, key: str, expiry: int) -> tuple[int, float, int, float]:
        if (window := self._recall("sliding", key)) is not None:
            return window
        begin, now = self._begin()
        previous_key, current_key = self.sliding_window_keys(key, expiry, now)
        with begin as conn:
            window = self._window(conn, previous_key, current_key, expiry, now)
        self._note("sliding", key, window)
        return window

    def clear_sliding_window(self, key: str, expiry: int) -> None:
        for window_key in self.sliding_window_keys(key, expiry, time.time()):
            self.clear(window_key)

    def _window(
        self, conn: Connection, previous_key: str, current_key: str, expiry: int, now: float
    ) -> tuple[int, float, int, float]:
        rows = conn.execute(
            text("SELECT key, count FROM rate_limit_counters WHERE key IN (:p, :c) AND expires_at > :now"),
            {"p": previous_key, "c": current_key, "now": now},
        ).all()
        counts = {k: int(n) for k, n in rows}
        return _sliding(counts.get(previous_key, 0), counts.get(current_key, 0), expiry, now)

    def refund_sliding_windows(self, refunds: list[tuple[str, int, int]]) -> None:
        """Give back `(key, expiry, cost)` to each counter's current window, at most its count:
        a reservation made in the previous window is not refunded into this one, which would let
        the two windows' sum exceed the limit."""
        begin, now = self._begin()
        keys = [self.sliding_window_keys(key, expiry, now)[1] for key, expiry, _ in refunds]
        for key, _, _ in refunds:
            self._forget(key)
        with begin as conn:
            conn.execute(_REFUND, {"keys": keys, "costs": [cost for *_, cost in refunds], "now": now})


def _sliding(previous: int, current: int, expiry: int, now: float) -> tuple[int, float, int, float]:
    """A sliding window as `limits` reads it: each count, with the seconds until the previous
    window stops counting and until the current one ends."""
    previous_ttl = _previous_ttl(now, expiry) if previous else 0.0
    current_ttl = (1 - (now / expiry) % 1) * expiry + expiry
    return previous, previous_ttl, current, current_ttl


def _previous_ttl(now: float, expiry: int) -> float:
    """Seconds until the previous window stops counting (its weight is this over `expiry`)."""
    return (1 - ((now - expiry) / expiry) % 1) * expiry
