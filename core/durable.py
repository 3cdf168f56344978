"""Durable work: leases on rows that one worker at a time works on for a while (ingestion's
documents, evaluation runs, agent runs), and the recovery thread that finds what dead workers left.

A leased row has `claimed_by` (its holder), `heartbeat_at` (the holder's last sign of life),
`attempts` (claims so far: work that keeps killing its worker is given up) and `status`.

- `claim` takes a row that is free, whose holder went silent, or that is already ours; one
  conditional UPDATE, so of two workers claiming at once exactly one gets the row.
- `beat` proves the holder alive and returns the rows still its own: a row cancelled, deleted or
  taken over meanwhile is missing, and that is the signal to stop, checked between steps
  (cooperative cancel: nothing is interrupted mid-write).
- `release` hands a row back at the end of a stretch of work, if it is still ours.
- `give_up` ends, with `values` (a failed status and its reason), a row that `claim` refused
  because it was claimed `max_attempts` times: work that keeps killing its worker stops there.
- `find_stalled` lists rows whose holder is silent, for a recovery pass to resume or re-send.

NOTE: every time is the database's `now()`, never a host's clock: workers on several hosts compare
heartbeats that one clock wrote.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable
from datetime import timedelta
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, func, or_, select, update
from sqlalchemy.orm import Session

log = logging.getLogger(__name__)
Row = TypeVar("Row")
# NOTE: the ORM objects in the session are left as they are (callers re-read what they need).
_UNSYNCED = {"synchronize_session": False}


def stale(model: Any, stale_after_s: float) -> ColumnElement[bool]:
    """The row's holder (or, never claimed, its creator) has been silent for `stale_after_s`."""
    silent_since = func.coalesce(model.heartbeat_at, model.created_at)
    return silent_since < func.now() - timedelta(seconds=stale_after_s)


def claimable(model: Any, owner: str, stale_after_s: float) -> ColumnElement[bool]:
    """Nobody holds the row, its holder went silent, or `owner` holds it already."""
    return or_(model.claimed_by.is_(None), model.claimed_by == owner, stale(model, stale_after_s))


def claim(
    session: Session,
    model: type[Row],
    id: Any,
    owner: str,
    stale_after_s: float,
    max_attempts: int | None,
    claimable_statuses: Collection[Any],
    **values: Any,
) -> Row | None:
    """Take the row for `owner` (setting `values` too), or None: not in a claimable status, held by
    a live worker, gone, or claimed `max_attempts` times already."""
    query = update(model).where(
        model.id == id, model.status.in_(claimable_statuses), claimable(model, owner, stale_after_s)
    )
    if max_attempts is not None:
        query = query.where(model.attempts < max_attempts)
    query = query.values(claimed_by=owner, heartbeat_at=func.now(), attempts=model.attempts + 1, **values)
    returning = query.returning(model).execution_options(populate_existing=True, **_UNSYNCED)
    return session.execute(returning).scalar_one_or_none()


def give_up(
    session: Session,
    model: Any,
    id: Any,
    owner: str,
    stale_after_s: float,
    max_attempts: int,
    claimable_statuses: Collection[Any],
    **values: Any,
) -> bool:
    """After `claim` returned None: set `values` on the row if that was for its attempts (claimable
    otherwise: in those statuses, nobody live holding it) and free it; True if it did."""
    query = (
        update(model)
        .where(model.id == id, model.status.in_(claimable_statuses), model.attempts >= max_attempts)
        .where(claimable(model, owner, stale_after_s))
        .values(claimed_by=None, **values)
        .returning(model.id)
    )
    return session.execute(query.execution_options(**_UNSYNCED)).scalar_one_or_none() is not None


def beat(
    session: Session,
    model: Any,
    ids: Iterable[Any],
    owner: str,
    statuses: Collection[Any] | None = None,
    **values: Any,
) -> set:
    """Refresh the heartbeat of `owner`'s rows among `ids` (in `statuses`, if given), setting
    `values` too; returns the ids still held. A missing id: stop working on it, write nothing."""
    ids = list(ids)
    if not ids:
        return set()
    query = update(model).where(model.id.in_(ids), model.claimed_by == owner)
    if statuses is not None:
        query = query.where(model.status.in_(statuses))
    query = query.values(heartbeat_at=func.now(), **values).returning(model.id)
    return set(session.execute(query.execution_options(**_UNSYNCED)).scalars())


def release(session: Session, model: Any, id: Any, owner: str, **values: Any) -> bool:
    """Hand the row back (setting `values` too) if `owner` still holds it; False if not (then the
    caller writes nothing: the row was cancelled or taken over)."""
    query = (
        update(model)
        .where(model.id == id, model.claimed_by == owner)
        .values(claimed_by=None, **values)
        .returning(model.id)
    )
    return session.execute(query.execution_options(**_UNSYNCED)).scalar_one_or_none() is not None


def find_stalled(
    session: Session, model: type[Row], statuses: Collection[Any], stale_after_s: float
) -> list[Row]:
    """Rows in `statuses` whose holder has been silent for `stale_after_s`, locked for this
    transaction; rows another recovery pass has locked are skipped (SKIP LOCKED)."""
    query = select(model).where(model.status.in_(statuses), stale(model, stale_after_s))
    return list(session.scalars(query.with_for_update(skip_locked=True)))


class Recovery(threading.Thread):
    """Runs named recovery passes once at start and then every `interval_s`, in a daemon thread.

    A failing pass (the database restarting, say) is logged and tried again next round; the
    other passes still run."""

    def __init__(self, name: str, passes: list[tuple[str, Callable[[], object]]], interval_s: float) -> None:
        super().__init__(name=name, daemon=True)
        self._passes, self._interval = passes, interval_s
        self._stopping = threading.Event()

    def run(self) -> None:
        while not self._stopping.is_set():
            for name, recovery_pass in self._passes:
                try:
                    recovery_pass()
                except Exception:
                    log.warning("recovery pass %r failed; trying again next round", name, exc_info=True)
            self._stopping.wait(self._interval)

    def stop(self) -> None:
        self._stopping.set()
