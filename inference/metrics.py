"""Prometheus metrics of the serving path, named after vLLM's (`vllm:` -> `groundwork:`).

Latencies are measured on the stream of deltas the front-end consumes, so they include queueing in
the engine; queue and cache gauges are read from `engine.stats()` when Prometheus scrapes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from inference.protocol import EngineStats, RequestOutput

# Bucket edges chosen to resolve both a GPU (milliseconds) and a small CPU box (seconds).
_TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0)
_TPOT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.5)
_E2E_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0, 300.0, 600.0)


class StatsSource(Protocol):
    def stats(self) -> EngineStats: ...


class _EngineStatsCollector:
    """Reads the engine's instantaneous state at scrape time instead of mirroring it in gauges."""

    def __init__(self, source: StatsSource) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        stats = self._source.stats()
        yield GaugeMetricFamily(
            "groundwork:num_requests_running", "Requests in the running batch.", value=stats.num_running
        )
        yield GaugeMetricFamily(
            "groundwork:num_requests_waiting", "Requests waiting to be scheduled.", value=stats.num_waiting
        )
        yield GaugeMetricFamily(
            "groundwork:kv_cache_usage_perc",
            "Fraction of KV-cache blocks in use (1 = full).",
            value=stats.kv_cache_usage,
        )
        yield CounterMetricFamily(
            "groundwork:num_preemptions",
            "Sequences preempted since start.",
            value=stats.num_preemptions_total,
        )
        # Hit rate = hits / queries (in tokens), as vLLM's prefix_cache_{queries,hits} counters.
        yield CounterMetricFamily(
            "groundwork:prefix_cache_queries",
            "Prompt tokens looked up in the prefix cache.",
            value=stats.prefix_cache_queries_total,
        )
        yield CounterMetricFamily(
            "groundwork:prefix_cache_hits",
            "Prompt tokens found in the prefix cache.",
            value=stats.prefix_cache_hits_total,
        )
        # NOTE: the rates are over the engine's whole life; Prometheus users derive windowed ones from
        # the counters (rate(hits) / rate(queries)). A gauge saves dashboards without PromQL the division.
        yield GaugeMetricFamily(
            "groundwork:prefix_cache_hit_rate",
            "Prefix-cache hits / queries (tokens) since start; 0 before any query.",
            value=stats.prefix_cache_hits_total / max(1, stats.prefix_cache_queries_total),
        )
        # Acceptance rate = accepted / draft tokens; tokens per verifying pass = 1 + accepted / drafts.
        yield CounterMetricFamily(
            "groundwork:spec_decode_num_drafts",
            "Speculative verification passes (a sequence with proposals in one step).",
            value=stats.spec_num_drafts_total,
        )
        yield CounterMetricFamily(
            "groundwork:spec_decode_num_draft_tokens",
            "Speculative tokens proposed.",
            value=stats.spec_proposed_tokens_total,
        )
        yield CounterMetricFamily(
            "groundwork:spec_decode_num_accepted_tokens",
            "Speculative tokens accepted.",
            value=stats.spec_accepted_tokens_total,
        )
        yield GaugeMetricFamily(
            "groundwork:spec_decode_acceptance_rate",
            "Speculative tokens accepted / proposed since start; 0 before any proposal.",
            value=stats.spec_acceptance_rate,
        )
        yield GaugeMetricFamily(
            "groundwork:spec_decode_mean_accepted_length",
            "Tokens emitted per verification pass (accepted drafts + 1) since start; 1 before any.",
            value=stats.spec_mean_accepted_length,
        )


class ServingMetrics:
    """All metrics of one server, in a registry of its own so several apps can live in one process."""

    def __init__(self, engine: object) -> None:
        self.registry = CollectorRegistry()
        self.prompt_tokens = Counter(
            "groundwork:prompt_tokens", "Prompt tokens of admitted requests.", registry=self.registry
        )
        self.generation_tokens = Counter(
            "groundwork:generation_tokens", "Generated tokens.", registry=self.registry
        )
        self.request_success = Counter(
            "groundwork:request_success",
            "Finished requests by finish reason.",
            ["finished_reason"],
            registry=self.registry,
        )
        self.time_to_first_token = Histogram(
            "groundwork:time_to_first_token_seconds",
            "Arrival to first generated token.",
            buckets=_TTFT_BUCKETS,
            registry=self.registry,
        )
        self.time_per_output_token = Histogram(
            "groundwork:time_per_output_token_seconds",
            "Mean gap between generated tokens, per request.",
            buckets=_TPOT_BUCKETS,
            registry=self.registry,
        )
        self.e2e_request_latency = Histogram(
            "groundwork:e2e_request_latency_seconds",
            "Arrival to last token.",
            buckets=_E2E_BUCKETS,
            registry=self.registry,
        )
        # Remote engines (an EngineClient over HTTP) have no stats; their server exports its own.
        if callable(getattr(engine, "stats", None)):
            self.registry.register(_EngineStatsCollector(engine))  # type: ignore[arg-type]

    def track(self) -> RequestTimer:
        """Start timing one request; call at arrival, before tokenisation and queueing."""
        return RequestTimer(self)


class RequestTimer:
    """Turns one request's stream of deltas into metric observations."""

    def __init__(self, metrics: ServingMetrics) -> None:
        self._metrics = metrics
        self._arrival = time.perf_counter()
        self._first_token_at: float | None = None
        self._num_tokens = 0
        self._admitted = False

    def observe(self, output: RequestOutput) -> None:
        now = time.perf_counter()
        metrics = self._metrics
        if not self._admitted:
            self._admitted = True
            metrics.prompt_tokens.inc(output.num_prompt_tokens)
        if output.new_token_ids:
            if self._first_token_at is None:
                self._first_token_at = now
                metrics.time_to_first_token.observe(now - self._arrival)
            self._num_tokens += len(output.new_token_ids)
            metrics.generation_tokens.inc(len(output.new_token_ids))
        if output.finished:
            self._finish(output.finish_reason or "unknown", now)

    def abandon(self) -> None:
        """The client went away before the end; counted as vLLM does, as finish reason "abort"."""
        self._finish("abort", time.perf_counter())

    def _finish(self, reason: str, now: float) -> None:
        metrics = self._metrics
        metrics.request_success.labels(finished_reason=reason).inc()
        metrics.e2e_request_latency.observe(now - self._arrival)
        if self._first_token_at is not None and self._num_tokens > 1:
            metrics.time_per_output_token.observe((now - self._first_token_at) / (self._num_tokens - 1))
