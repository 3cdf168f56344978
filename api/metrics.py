"""Platform metrics on /metrics: question answering latency and the prefix-cache hit rate of its prompts,
responses by route and status, goodput (api/slo.py), the in-process engine's load and ingestion's backlog
(api/metrics_collectors.py)."""

from __future__ import annotations

import time
import uuid
from collections import deque
from collections.abc import AsyncIterator

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from api.admission import AnswerSlots
from api.deps import SessionDep, SettingsDep, StateDep, get_admin, get_principal
from api.metrics_collectors import EngineLoad, IngestionBacklog
from api.routers.tenants import get_operator
from api.slo import SloTracker, observed
from api.state import AppState
from core.errors import ClientError
from core.heap import GcPauses

router = APIRouter(tags=["metrics"])


class PlatformMetrics:
    def __init__(self, state: AppState) -> None:
        self.prompt_total = 0
        self.cached_total = 0
        self.requests_total = 0  # HTTP requests served, for the UI's request-rate plot
        # (monotonic time, timings in ms, completion tokens) of recent answers, for windowed percentiles.
        self.recent_answers: deque[tuple[float, dict, int]] = deque(maxlen=2000)
        self.registry = CollectorRegistry()
        self.asks = Counter("groundwork_ask_requests", "Answered /v1/ask requests", registry=self.registry)
        self.prompt_tokens = Counter(
            "groundwork_ask_prompt_tokens", "Prompt tokens of /v1/ask generations", registry=self.registry
        )
        self.cached_tokens = Counter(
            "groundwork_ask_cached_prompt_tokens",
            "Prompt tokens of /v1/ask served from the prefix cache",
            registry=self.registry,
        )
        self.hit_rate = Gauge(
            "groundwork_ask_prefix_cache_hit_rate",
            "Cached / prompt tokens over all /v1/ask traffic",
            registry=self.registry,
        )
        self.latency = Histogram(
            "groundwork_ask_stage_seconds",
            "Latency of /v1/ask stages",
            ["stage"],
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=self.registry,
        )
        self.http_responses = Counter(
            "groundwork:http_responses",
            "API responses by route template, method and status.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.tenant_tokens = Counter(
            "groundwork:tenant_tokens",
            "Prompt and completion tokens of answers, per tenant.",
            ["tenant", "kind"],
            registry=self.registry,
        )
        self.escalations = Counter(
            "groundwork:cascade_escalations",
            "Answers (ask, rag/ chat) and agent turns handed to the next model of qa.cascade, by the "
            "model whose answer was weak and why.",
            ["surface", "model", "reason"],
            registry=self.registry,
        )
        self.sql_round_trips = Counter(
            "groundwork:sql_round_trips",
            "Statements, commits and rollbacks sent to the database, by the API route whose request "
            "sent them.",
            ["route"],
            registry=self.registry,
        )
        self.gc_pause = Histogram(
            "groundwork_gc_pause_seconds",
            "Passes of the API process's garbage collector, which hold every request meanwhile.",
            ["generation"],
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1),
            registry=self.registry,
        )
        self.gc_pauses = GcPauses(lambda gen, s: self.gc_pause.labels(str(gen)).observe(s))
        self.slo = SloTracker(state.settings.slo, self.registry)
        self.registry.register(EngineLoad(state))
        self.registry.register(IngestionBacklog(state))


def observed_route(
    events: AsyncIterator[dict], state: AppState, route: str, tenant: uuid.UUID
) -> AsyncIterator[dict]:
    """A route's answer events, recorded against its SLOs (goodput) and its tenant's tokens."""
    metrics = state.metrics
    return observed(events, metrics.slo, route, metrics.tenant_tokens, tenant)


def record_escalations(state: AppState, surface: str, escalations: list[dict]) -> None:
    """Count cascade escalations (`{from, reason}` each) of an answer or an agent turn."""
    counter = state.metrics.escalations
    for step in escalations:
        counter.labels(surface, step["from"], step["reason"]).inc()


def admit_early(state: AppState, slots: AnswerSlots | None, route: str, tenant: uuid.UUID) -> None:
    """Answer admission's 503 before the request reserves anything (`AnswerSlots.check`: a flooding
    tenant's refusals then touch no storage); it still counts against the route's SLOs, as a refusal
    inside the stream does."""
    if slots is None:
        return
    try:
        slots.check(str(tenant))
    except ClientError:
        state.metrics.slo.record(route, None, None, 0.0, failed=True)
        raise


async def recorded_answers(events: AsyncIterator[dict], state: AppState) -> AsyncIterator[dict]:
    """An answer's events (usecases/answer.py), its `done` recorded in the ask metrics."""
    async for event in events:
        if event["type"] == "done":
            record_ask(state, event["usage"], event["timings"], event["escalations"])
        yield event


def record_ask(state: AppState, usage: dict, timings: dict, escalations: list[dict]) -> None:
    metrics = state.metrics
    metrics.asks.inc()
    record_escalations(state, "answer", escalations)
    prompt = usage.get("prompt_tokens", 0)
    cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
    metrics.prompt_tokens.inc(prompt)
    metrics.cached_tokens.inc(cached)
    metrics.prompt_total += prompt
    metrics.cached_total += cached
    metrics.hit_rate.set(metrics.cached_total / metrics.prompt_total if metrics.prompt_total else 0.0)
    metrics.recent_answers.append((time.monotonic(), dict(timings), usage.get("completion_tokens", 0)))
    for stage in ("retrieval_ms", "rerank_ms", "ttft_ms", "total_ms"):
        if stage in timings:
            metrics.latency.labels(stage.removesuffix("_ms")).observe(timings[stage] / 1000)


def _metrics_reader(request: Request, session: SessionDep, settings: SettingsDep, state: StateDep) -> None:
    """Metrics cover every tenant: with auth required, only the operator's (the default tenant's)
    `admin` keys read them; another tenant's admin is refused like a missing scope."""
    if settings.auth_required:
        get_operator(get_admin(get_principal(request, session, settings, state, None)))


@router.get(
    "/metrics",
    dependencies=[Depends(_metrics_reader)],
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
def metrics(request: Request) -> Response:
    """Prometheus metrics of the platform API (an admin key when auth is required)."""
    state: AppState = request.app.state.groundwork
    registry = state.metrics.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
