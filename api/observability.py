"""Per-request observability: a server span per API request while tracing is on (continuing a caller's
`traceparent`), its trace id sent back as `x-trace-id`, and responses counted by route and status in
`groundwork:http_responses_total` (the error, 429 and 503 alerts read it)."""

from __future__ import annotations

from fastapi import FastAPI, Request
from opentelemetry.trace import SpanKind

from api.metrics import platform_metrics
from core.tracing import continued, current_trace_id


def install_observability(app: FastAPI) -> None:
    @app.middleware("http")
    async def observe(request: Request, call_next):
        path = request.url.path
        if path.startswith("/ui"):  # the UI's static files
            return await call_next(request)
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
                    platform_metrics(state).http_responses.labels(route, request.method, str(status)).inc()
            if (trace_id := current_trace_id()) is not None:
                response.headers["x-trace-id"] = trace_id
        return response
