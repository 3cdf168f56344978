"""Worker-side tracing: each task runs in a span continuing the trace of whoever sent it (the
upload's request: `enqueue` puts its `traceparent` in the message headers), so parse -> chunk ->
embed -> store show under the upload that started them.

Tracing is configured in each worker process on its first task (prefork children must build their
own exporter thread after the fork).
"""

from __future__ import annotations

import os
from contextlib import ExitStack

from celery import current_app
from celery.signals import task_postrun, task_prerun, worker_process_shutdown
from opentelemetry.trace import SpanKind

from core.tracing import configure_tracing, continued

_configured: dict[str, int] = {}
_open: dict[str, ExitStack] = {}  # task id -> its span, from prerun to postrun


@task_prerun.connect
def _start_span(task_id: str, task, **_) -> None:
    if _configured.get("pid") != os.getpid():
        _configured["pid"] = os.getpid()
        settings = current_app.conf.get("groundwork_settings")
        if settings is not None:
            configure_tracing(settings.tracing, "groundwork-worker")
    request = task.request
    # Custom headers arrive as request attributes (protocol 2) or in request.headers, by Celery version.
    carrier = {k: v for k in ("traceparent", "tracestate") if (v := _header(request, k)) is not None}
    stack = ExitStack()
    span = stack.enter_context(
        continued(
            carrier,
            f"task {task.name}",
            {
                "messaging.system": "celery",
                "messaging.message.id": task_id,
                "groundwork.retries": request.retries,
            },
            SpanKind.CONSUMER,
        )
    )
    if span is None:
        stack.close()
        return
    _open[task_id] = stack


@task_postrun.connect
def _end_span(task_id: str, state: str | None = None, **_) -> None:
    stack = _open.pop(task_id, None)
    if stack is not None:
        stack.close()


@worker_process_shutdown.connect
def _flush(**_) -> None:
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if hasattr(provider, "shutdown"):
        provider.shutdown()  # sends what is still batched


def _header(request, key: str) -> str | None:
    value = getattr(request, key, None)
    return value if value is not None else (getattr(request, "headers", None) or {}).get(key)
