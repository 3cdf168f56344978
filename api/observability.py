"""Per-request observability: a server span per API request while tracing is on (continuing a caller's
`traceparent`), its trace id sent back as `x-trace-id`, and responses counted by route and status in
`groundwork:http_responses_total` (the error, 429 and 503 alerts read it), and the SQL statements
and commits each route sends in `groundwork:sql_round_trips_total` (database round trips per request)."""

from __future__ import annotations

from contextvars import ContextVar

from fastapi import FastAPI, Request
from opentelemetry.trace import SpanKind
from prometheus_client import Counter
from sqlalchemy import Engine, event

from core.tracing import continued, current_trace_id

# NOTE: the request's ASGI scope, not its route: routing fills `scope["route"]` after this middleware
# runs, and a statement reads it when it is sent. Threads (to_thread, the threadpool) and the tasks
# a request starts copy the context, so their statements count for the request too.
_request_scope: ContextVar[dict | None] = ContextVar("request_scope", default=None)


def _route(scope: dict | None) -> str:
    if scope is None:
        return "background"  # the metrics sampler, recovery, workers' threads
    return getattr(scope.get("route"), "path", "unmatched")


def count_round_trips(engine: Engine, counter: Counter) -> None:
    """Count every statement, commit and rollback `engine` sends, by the API route that sent it."""

    def count(*_) -> None:
        counter.labels(_route(_request_scope.get())).inc()

    # NOTE: not the pool's reset on check-in: the driver sends nothing for a connection left idle.
    for name in ("before_cursor_execute", "commit", "rollback"):
        event.listen(engine, name, count)


def install_observability(app: FastAPI) -> None:
    @app.middleware("http")
    async def observe(request: Request, call_next):
        path = request.url.path
        if path.startswith("/ui"):  # the UI's static files
            return await call_next(request)
        scope_token = _request_scope.set(request.scope)
        attributes = {"http.request.method": request.method, "url.path": path}
        status = 500  # an exception escaping the app becomes a 500 outside this middleware
        with continued(request.headers, f"{request.method} {path}", attributes, SpanKind.SERVER) as span:
            try:
                response = await call_next(request)
                status = response.status_code
            finally:
                route = getattr(request.scope.get("route"), "path", "unmatched")
                if span is not None:
                    span.update_name(f"{request.method} {route}")
                    span.set_attributes({"http.route": route, "http.response.status_code": status})
                state = getattr(request.app.state, "groundwork", None)
                if state is not None:
                    state.metrics.http_responses.labels(route, request.method, str(status)).inc()
                _request_scope.reset(scope_token)
            if (trace_id := current_trace_id()) is not None:
                response.headers["x-trace-id"] = trace_id
        return response
