"""A short in-memory history of the platform's and the engine's metrics, for the UI's dashboard.

A background thread samples every `interval_s` seconds into a ring buffer; GET /v1/metrics/history
returns it. Rates are per second over the last interval; answer latency percentiles are over the
answers of the last `window_s` seconds (null when there were none), so a quiet platform plots gaps.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

import numpy as np
from fastapi import APIRouter, Query
from pydantic import BaseModel
from sqlalchemy import func, select

from api.deps import DEFAULT_TENANT_ID, CurrentTenant, StateDep
from api.state import AppState
from core.errors import ClientError
from core.models import Document, DocumentStatus, IngestionJob
from ingestion.state import TERMINAL

log = logging.getLogger(__name__)
router = APIRouter(prefix="/v1/metrics", tags=["metrics"])

_IN_FLIGHT = [s for s in DocumentStatus if s not in TERMINAL]


class Sample(BaseModel):
    t: float  # unix seconds
    requests_per_s: float | None
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    tpot_p50_ms: float | None
    tpot_p99_ms: float | None
    output_tokens_per_s: float | None
    prefix_cache_hit_rate: float | None
    kv_cache_usage: float | None
    engine_queue: int | None
    ingestion_queue: int | None
    chunks_per_s: float | None
    documents_per_s: float | None
    goodput: float | None = None  # share of the SLO window's answers meeting every SLO (api/slo.py)


class History(BaseModel):
    interval_s: float
    samples: list[Sample]


class MetricsSampler:
    def __init__(self, state: AppState, interval_s: float = 2.0, keep: int = 900, window_s: float = 60.0):
        self.state, self.interval_s, self.window_s = state, interval_s, window_s
        self.samples: deque[Sample] = deque(maxlen=keep)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="metrics-sampler", daemon=True)
        self._prev: dict[str, float | None] = {}  # running totals at the previous sample
        self._prev_time = 0.0

    def start(self) -> MetricsSampler:
        self._thread.start()
        return self

    def shutdown(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while True:
            try:
                self.samples.append(self.sample())
            except Exception:  # a sample lost (database restarting...) is no reason to stop sampling
                log.warning("metrics sample failed", exc_info=True)
            if self._stop.wait(self.interval_s):
                return

    def sample(self) -> Sample:
        now = time.monotonic()
        platform = self.state.metrics
        answers = list(platform.recent_answers)
        recent = [a for a in answers if a[0] >= now - self.window_s]
        ttft = [t["ttft_ms"] for _, t, _ in recent if "ttft_ms" in t]
        tpot = [
            (t["generation_ms"] - t["ttft_ms"]) / (n - 1)
            for _, t, n in recent
            if n > 1 and "generation_ms" in t and "ttft_ms" in t
        ]
        engine = self.state.llm.engine
        stats = engine.stats() if engine is not None and hasattr(engine, "stats") else None
        docs, chunks, queued = self._ingestion()
        totals = {
            "requests": platform.requests_total,
            # A remote generator has no engine stats: count the answers' tokens instead.
            "generated": stats.num_generation_tokens_total if stats else sum(n for _, _, n in answers),
            "documents": docs,
            "chunks": chunks,
        }
        dt = now - self._prev_time

        def rate(name: str) -> float | None:
            before, after = self._prev.get(name), totals[name]
            if before is None or after is None or dt <= 0:
                return None
            return round(max(0.0, after - before) / dt, 3)  # a deleted job can lower a total

        sample = Sample(
            t=time.time(),
            requests_per_s=rate("requests"),
            ttft_p50_ms=_pct(ttft, 50),
            ttft_p99_ms=_pct(ttft, 99),
            tpot_p50_ms=_pct(tpot, 50),
            tpot_p99_ms=_pct(tpot, 99),
            output_tokens_per_s=rate("generated"),
            prefix_cache_hit_rate=(
                platform.cached_total / platform.prompt_total if platform.prompt_total else None
            ),
            kv_cache_usage=stats.kv_cache_usage if stats else None,
            engine_queue=stats.num_waiting if stats else None,
            ingestion_queue=queued,
            chunks_per_s=rate("chunks"),
            documents_per_s=rate("documents"),
            goodput=platform.slo.goodput(),
        )
        self._prev, self._prev_time = totals, now
        return sample

    def _ingestion(self) -> tuple[int, int, int]:
        """(documents finished, chunks embedded) over all jobs, and documents waiting or in progress."""
        with self.state.sessions() as session:
            done, chunks = session.execute(
                select(
                    func.coalesce(func.sum(IngestionJob.documents_done + IngestionJob.documents_failed), 0),
                    func.coalesce(func.sum(IngestionJob.chunks_embedded), 0),
                )
            ).one()
            queued = session.execute(select(func.count()).where(Document.status.in_(_IN_FLIGHT))).scalar_one()
        return int(done), int(chunks), int(queued)


def _pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 2) if values else None


@router.get("/history", response_model=History)
def metrics_history(
    state: StateDep,
    tenant: CurrentTenant,
    since: float = Query(default=0.0, description="Only samples taken after this unix time."),
):
    """Samples of request rate, answer latency, engine load and ingestion throughput, oldest first.
    They are platform-wide (every tenant's load), so only the operator's keys read them."""
    if tenant != DEFAULT_TENANT_ID:
        raise ClientError(
            403, "not_operator", "the metrics history is platform-wide: only the operator's keys read it"
        )
    sampler = state.sampler
    if sampler is None:
        return History(interval_s=0, samples=[])
    return History(interval_s=sampler.interval_s, samples=[s for s in list(sampler.samples) if s.t > since])
