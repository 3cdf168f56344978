"""The platform's FastAPI application."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, nullcontext

from fastapi import FastAPI, Request

import web
from agents.runs.recovery import start_recovery
from api import metrics, metrics_history
from api.admission import build_answer_slots
from api.agent_runner import build_runner
from api.body_guard import BodyGuard
from api.early_refusal import EarlyRefusal, KnownKeys
from api.errors import classify, error_response, install_error_handlers
from api.foreground import ForegroundHold
from api.mcp import http as mcp_http
from api.metrics import PlatformMetrics
from api.observability import count_round_trips, install_observability
from api.ratelimit import build_rate_limiter
from api.routers import (
    agent_tools,
    agents,
    ask,
    chat,
    collections,
    connectors,
    conversations,
    documents,
    eval_data,
    evals,
    formats,
    health,
    jobs,
    keys,
    mcp,
    models,
    retrieval_defaults,
    search,
    tenant,
    tenants,
)
from api.schemas.common import ERROR_RESPONSES
from api.state import AppState
from core.runtime import DatabaseHandle
from core.settings import Settings
from core.telemetry import request_id_var
from core.tracing import configure_tracing
from usecases.platform import build_platform

log = logging.getLogger("groundwork.api")


def build_state(settings: Settings, database: DatabaseHandle | None = None) -> AppState:
    """The platform and the API's services; raises DatabaseNotReady with a clear message."""
    state = AppState(**vars(build_platform(settings, database)))
    state.metrics = PlatformMetrics(state)
    state.rate_limiter = build_rate_limiter(state)
    state.answer_slots = build_answer_slots(settings.qa)
    state.agent_runner = build_runner(state)
    state.known_keys = KnownKeys()
    return state


def create_app(settings: Settings, state: AppState | None = None) -> FastAPI:
    """The app; `state` is built at start-up unless given (the CLI builds it first to fail early)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        nonlocal state
        state = state or build_state(settings)
        app.state.groundwork = state
        configure_tracing(settings.tracing, "groundwork-api")
        limiter = state.rate_limiter.database_engine if state.rate_limiter else None
        for engine in filter(None, (state.engine, limiter)):  # the limiter's counters have their own
            count_round_trips(engine, state.metrics.sql_round_trips)
        state.sampler = metrics_history.MetricsSampler(state).start()
        log.info("api ready", extra={"pgvector": ".".join(map(str, state.pgvector_version))})
        start_recovery(state.agent_runner)  # runs a dead process left: now, then now and then
        state.metrics.gc_pauses.start()
        try:
            async with mcp_endpoint.running() if mcp_endpoint else nullcontext():
                yield
        finally:
            await state.aclose()

    app = FastAPI(title="Groundwork", version="0.1.0", lifespan=lifespan)
    install_error_handlers(app)
    app.add_middleware(ForegroundHold)  # innermost: refused requests hold nothing
    app.add_middleware(EarlyRefusal)  # after the body guard (401 first), inside request_context: logged
    app.add_middleware(BodyGuard, settings=settings)  # inside request_context: refusals are logged

    @app.middleware("http")
    async def request_context(request: Request, call_next):
        rid = request.headers.get("x-request-id") or uuid.uuid4().hex
        token = request_id_var.set(rid)
        start = time.perf_counter()
        try:
            response = await call_next(request)
        except Exception as exc:  # answered here, not outside, so that the log below records it
            err = classify(exc)
            response = error_response(err.status, err.code, err.message, err.details, err.headers)
        finally:
            request_id_var.reset(token)
        response.headers["x-request-id"] = rid
        response.headers.update(getattr(request.state, "rate_limit_headers", None) or {})
        if state is not None and not request.url.path.startswith("/ui"):  # API requests, not UI files
            state.metrics.requests_total += 1
        log.info(
            "request",
            extra={
                "request_id": rid,
                "method": request.method,
                "path": request.url.path,
                "status": response.status_code,
                "ms": round((time.perf_counter() - start) * 1000, 1),
            },
        )
        return response

    install_observability(app)  # outermost: its span covers the request's log line
    for router in (
        health.router,
        metrics.router,
        collections.router,
        documents.router,
        connectors.router,
        jobs.router,
        search.router,
        ask.router,
        chat.router,
        keys.router,
        tenant.router,
        tenants.router,
        agents.router,
        eval_data.router,
        evals.router,
        models.router,
        mcp.router,
        metrics_history.router,
        conversations.router,
        formats.router,
        agent_tools.router,
        retrieval_defaults.router,
    ):
        app.include_router(router, responses=ERROR_RESPONSES)
    mcp_endpoint = mcp_http.mount(app) if settings.mcp.server_enabled else None
    web.mount(app)
    return app
