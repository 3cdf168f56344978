"""Scrape-time collectors of the platform's /metrics: the in-process engine's load (the engine's own
collector, once the engine is loaded) and ingestion's backlog and workers."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from sqlalchemy import func, select

from api.state import AppState
from core.models import Document
from inference.metrics import EngineStatsCollector
from inference.protocol import EngineStats

log = logging.getLogger(__name__)


class EngineLoad(EngineStatsCollector):
    """The engine's gauges and counters; nothing while no request has loaded the engine (or the
    generator is a remote server, which exports its own)."""

    def __init__(self, state: AppState) -> None:
        super().__init__(self)
        self.state = state

    def stats(self) -> EngineStats | None:
        engine = self.state.llm.engine
        return engine.stats() if engine is not None and hasattr(engine, "stats") else None


class IngestionBacklog:
    """Documents by status (all tenants) and the Celery workers answering a ping. The ping waits its
    whole timeout for replies, so its answer is kept for `ping_every_s`."""

    def __init__(self, state: AppState, ping_timeout_s: float = 0.5, ping_every_s: float = 15.0) -> None:
        self.state, self.ping_timeout_s, self.ping_every_s = state, ping_timeout_s, ping_every_s
        self._workers: tuple[float, int | None] = (float("-inf"), None)
        self._lock = threading.Lock()

    def collect(self) -> Iterator[Metric]:
        with self.state.sessions() as session:
            rows = session.execute(select(Document.status, func.count()).group_by(Document.status)).all()
        docs = GaugeMetricFamily("groundwork:documents", "Documents by ingestion status.", labels=["status"])
        for status, count in rows:
            docs.add_metric([str(getattr(status, "value", status))], count)
        yield docs
        if (workers := self._ping()) is not None:
            yield GaugeMetricFamily(
                "groundwork:celery_workers", "Ingestion workers answering a ping.", value=workers
            )

    def _ping(self) -> int | None:
        with self._lock:
            at, workers = self._workers
            if time.monotonic() - at < self.ping_every_s:
                return workers
            try:
                workers = len(self.state.celery.control.ping(timeout=self.ping_timeout_s))
            except Exception:  # a broker without broadcast (the SQLAlchemy transport): not reported
                log.debug("worker ping failed", exc_info=True)
                workers = None
            self._workers = (time.monotonic(), workers)
            return workers
