"""Goodput: the share of requests that meet every latency SLO of their route (TTFT, TPOT, end to end).

`observed()` wraps a route's event stream (`token`..., `done`), times it from arrival and records
the request in `SloTracker`. A request that fails (an error, a 503 or 429 refusal raised before its
first event) misses its SLO. Exported:
  groundwork:slo_requests_total{route}, groundwork:slo_good_requests_total{route}  (rate() them)
  groundwork:slo_missed_total{route,slo}   which SLO a request missed first: ttft|tpot|e2e|error
  groundwork:request_{ttft,tpot,e2e}_seconds{route}  histograms, as the user saw them
  groundwork:goodput{route}  good / all over the last `slo.window_s` (absent without requests)
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric

from core.settings.observability import SloSettings
from core.tracing import annotate

_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0)
_TPOT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5)


class SloTracker:
    def __init__(self, settings: SloSettings, registry: CollectorRegistry) -> None:
        self.settings = settings
        self.requests = Counter(
            "groundwork:slo_requests", "Requests judged against their SLOs.", ["route"], registry=registry
        )
        self.good = Counter(
            "groundwork:slo_good_requests", "Requests meeting all their SLOs.", ["route"], registry=registry
        )
        self.missed = Counter(
            "groundwork:slo_missed",
            "Requests missing an SLO, by the first one missed.",
            ["route", "slo"],
            registry=registry,
        )
        hist = {"registry": registry, "labelnames": ["route"]}
        self.ttft = Histogram("groundwork:request_ttft_seconds", "To first token.", buckets=_BUCKETS, **hist)
        self.tpot = Histogram(
            "groundwork:request_tpot_seconds", "Mean gap between tokens.", buckets=_TPOT_BUCKETS, **hist
        )
        self.e2e = Histogram("groundwork:request_e2e_seconds", "To the end.", buckets=_BUCKETS, **hist)
        self._recent: deque[tuple[float, str, bool]] = deque(maxlen=20_000)
        self._lock = threading.Lock()
        registry.register(self)

    def record(
        self, route: str, ttft_s: float | None, tpot_s: float | None, e2e_s: float, failed: bool = False
    ) -> bool:
        """Count one finished request; True if it met every SLO of its route."""
        slo = self.settings.routes.get(route)
        if slo is None:
            return True
        if ttft_s is not None:
            self.ttft.labels(route).observe(ttft_s)
        if tpot_s is not None:
            self.tpot.labels(route).observe(tpot_s)
        self.e2e.labels(route).observe(e2e_s)
        misses = [
            name
            for name, bad in (
                ("error", failed),
                ("ttft", ttft_s is None or ttft_s > slo.ttft_s),
                ("tpot", tpot_s is not None and tpot_s > slo.tpot_s),
                ("e2e", e2e_s > slo.e2e_s),
            )
            if bad
        ]
        self.requests.labels(route).inc()
        if misses:
            self.missed.labels(route, misses[0]).inc()
        else:
            self.good.labels(route).inc()
        with self._lock:
            self._recent.append((time.monotonic(), route, not misses))
        return not misses

    def goodput(self, route: str | None = None) -> float | None:
        """Good / all over the window (one route or all); None without requests in it."""
        since = time.monotonic() - self.settings.window_s
        with self._lock:
            recent = [good for t, r, good in self._recent if t >= since and route in (None, r)]
        return sum(recent) / len(recent) if recent else None

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "groundwork:goodput",
            f"Share of the last {self.settings.window_s:g} s of requests meeting every SLO of their route.",
            labels=["route"],
        )
        for route in self.settings.routes:
            if (share := self.goodput(route)) is not None:
                family.add_metric([route], share)
        yield family


async def observed(
    events: AsyncIterator[dict], tracker: SloTracker, route: str, tenant_tokens: Counter, tenant: uuid.UUID
) -> AsyncIterator[dict]:
    """Pass a route's events through, timing them from now (the request's arrival at the handler) and
    recording the request against its SLOs and its tokens against its tenant."""
    start = time.perf_counter()
    first = last = None
    done: dict | None = None
    failed = True
    try:
        async for event in events:
            if event["type"] == "token":
                last = time.perf_counter()
                first = first or last
            elif event["type"] == "done":
                done = event
            yield event
        failed = False
    except Exception as exc:
        if getattr(exc, "status", 500) < 500:  # the client's mistake (a 4xx), not the service's
            failed = None
        raise
    finally:
        if failed is not None:
            _record(tracker, route, tenant_tokens, tenant, start, first, last, done, failed)


def _record(tracker, route, tenant_tokens, tenant, start, first, last, done, failed) -> None:
    end = time.perf_counter()
    usage = (done or {}).get("usage") or {}
    completion = int(usage.get("completion_tokens", 0))
    # NOTE: to the last token, not the end: claim checks after the answer are not decoding.
    tpot = (last - first) / (completion - 1) if first is not None and completion > 1 else None
    ttft = None if first is None else first - start
    good = tracker.record(route, ttft, tpot, end - start, failed or done is None)
    annotate({"groundwork.slo.met": good})
    for kind in ("prompt", "completion"):
        if n := int(usage.get(f"{kind}_tokens", 0)):
            tenant_tokens.labels(str(tenant), kind).inc(n)
