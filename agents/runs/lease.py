"""A segment's lease on its agent run (core/durable.py): claimed before the segment starts, beaten
while it runs, checked between steps, released at its end.

The holder is `<process id>/<run id>`. Any API process may drive any run, so this is what keeps
two processes from driving one run at once, and how a cancel written by one process reaches a
segment that another one drives: the cancelled row no longer answers the holder's beat.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from sqlalchemy import func
from sqlalchemy.orm import Session, sessionmaker

from agents.runs.store import ACTIVE, STATUS_OF, WAITING
from core import durable
from core.database import session_scope
from core.models import AgentRun

log = logging.getLogger("groundwork.agents")
# A segment starts from a queued run, resumes a paused one, or takes over one whose process died.
CLAIMABLE = (*ACTIVE, WAITING)


class LeaseLost(Exception):
    """The run was cancelled, deleted or taken over elsewhere: its segment stops and writes nothing."""


class RunLease:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        process: str,
        run_id: uuid.UUID,
        stale_after_s: float,
        max_attempts: int,
    ) -> None:
        self.sessions, self.run_id, self.stale_after_s = sessions, run_id, stale_after_s
        self.max_attempts = max_attempts
        self.owner = f"{process}/{run_id}"
        self.lost = False
        self._beating: asyncio.Task | None = None

    def claim(self) -> bool:
        """Take the run (free, its holder silent for `stale_after_s`, or ours already); False if a
        live segment holds it or it is finished, or if it started `max_attempts` segments in a row
        that never ended (their processes died): then it fails, saying so."""
        with session_scope(self.sessions) as session:
            args = (session, AgentRun, self.run_id, self.owner, self.stale_after_s, self.max_attempts)
            if durable.claim(*args, CLAIMABLE) is not None:
                return True
            detail = func.concat(
                "gave up: the run's process died in ", AgentRun.attempts, " segments in a row"
            )
            values = {
                "finish_reason": "error",
                "detail": detail,
                "required_action": {},
                "finished_at": func.now(),
            }
            if durable.give_up(*args, CLAIMABLE, status=STATUS_OF["error"], **values):
                log.warning("agent run %s: given up after %d segments died", self.run_id, self.max_attempts)
            return False

    def hold(self, session: Session) -> None:
        """Between steps, in the transaction that records the step: LeaseLost (the transaction
        rolled back) unless the run is still ours and not cancelled."""
        if self.lost or not durable.beat(session, AgentRun, [self.run_id], self.owner, CLAIMABLE):
            self.lost = True
            session.rollback()
            raise LeaseLost(str(self.run_id))

    def release(self, session: Session) -> None:
        """At the segment's end, in the transaction that records it: hand the run back (a clean end
        is not a crash: attempts start again), or LeaseLost (rolled back)."""
        if self.lost or not durable.release(session, AgentRun, self.run_id, self.owner, attempts=0):
            self.lost = True
            session.rollback()
            raise LeaseLost(str(self.run_id))
        if self._beating is not None:  # NOTE: a beat now would find the run not ours and cancel the
            self._beating.cancel()  # segment while it publishes its result

    def keep_alive(self, segment: asyncio.Task) -> None:
        """Beat every third of `stale_after_s` while `segment` runs; cancel it once the run is lost
        (a cancel elsewhere is seen within that time even mid LLM call)."""
        self._beating = asyncio.create_task(self._beat(segment))
        segment.add_done_callback(lambda _: self._beating.cancel())

    async def _beat(self, segment: asyncio.Task) -> None:
        while True:
            await asyncio.sleep(self.stale_after_s / 3)
            try:
                held = await asyncio.to_thread(self._beat_once)
            except Exception:  # the database may be restarting: a missed beat is harmless
                log.warning("agent run %s: heartbeat failed", self.run_id, exc_info=True)
                continue
            if not held:
                log.info("agent run %s was cancelled or taken over elsewhere; stopping", self.run_id)
                self.lost = True
                segment.cancel()
                return

    def _beat_once(self) -> bool:
        with session_scope(self.sessions) as session:
            return bool(durable.beat(session, AgentRun, [self.run_id], self.owner, CLAIMABLE))
