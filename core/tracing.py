"""OpenTelemetry traces of the platform: off unless `tracing.enabled`, then OTLP/HTTP to a collector.

Packages mark their stage boundaries with `span(...)` (a context manager) or `@traced(...)` (sync,
async and threaded functions alike) and add what they learn with `annotate(...)`. While tracing is
off these return before touching OpenTelemetry, so an untraced request pays a flag check per stage.

Prompts, questions and document text go on spans only with `tracing.record_content`: callers pass
them through `content(...)`, which drops them otherwise.

NOTE: OpenTelemetry's tracer provider is process-wide by design (set once, read by every library),
so the switch beside it is too; `configure_tracing` is called once per process (API, worker).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

from core.settings.observability import TracingSettings

if TYPE_CHECKING:  # the SDK is imported only when tracing is configured
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

F = TypeVar("F", bound=Callable[..., Any])
Attributes = Mapping[str, Any]

_tracer = trace.get_tracer("groundwork")
_switch = {"on": False, "content": False}
_provider: list[TracerProvider] = []  # the one this process installed, if any


def configure_tracing(
    settings: TracingSettings, service: str, exporter: SpanExporter | None = None
) -> TracerProvider | None:
    """Install the tracer provider when tracing is enabled (or an `exporter` is given: tests pass an
    in-memory one, exported synchronously); returns it, or None when tracing stays off."""
    if not settings.enabled and exporter is None:
        return None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    if not _provider:
        provider = TracerProvider(
            resource=Resource.create({"service.name": service}),
            sampler=ParentBased(TraceIdRatioBased(settings.sample_ratio)),
        )
        trace.set_tracer_provider(provider)
        _provider.append(provider)
    if exporter is not None:
        _provider[0].add_span_processor(SimpleSpanProcessor(exporter))
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        processor = BatchSpanProcessor(
            OTLPSpanExporter(endpoint=settings.otlp_endpoint), schedule_delay_millis=settings.export_delay_ms
        )
        _provider[0].add_span_processor(processor)
    _switch.update(on=True, content=settings.record_content)
    return _provider[0]


def disable_tracing() -> None:
    """Stop making spans (the provider stays installed: OpenTelemetry cannot replace it)."""
    _switch.update(on=False, content=False)


def tracing_on() -> bool:
    return _switch["on"]


_OFF = contextlib.nullcontext()  # reusable: what span() returns while tracing is off


def span(
    name: str, attributes: Attributes | None = None, kind: trace.SpanKind = trace.SpanKind.INTERNAL
) -> contextlib.AbstractContextManager:
    """A child of the current span for the block (entered as the span; None while tracing is off)."""
    if not _switch["on"]:
        return _OFF
    return _tracer.start_as_current_span(name, kind=kind, attributes=_clean(attributes))


def traced(name: str, attributes: Attributes | None = None) -> Callable[[F], F]:
    """Decorator: each call of the function runs in `span(name, attributes)`."""

    def wrap(fn: F) -> F:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(*args, **kwargs):
                if not _switch["on"]:
                    return await fn(*args, **kwargs)
                with span(name, attributes):
                    return await fn(*args, **kwargs)

            return run_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def run(*args, **kwargs):
            if not _switch["on"]:
                return fn(*args, **kwargs)
            with span(name, attributes):
                return fn(*args, **kwargs)

        return run  # type: ignore[return-value]

    return wrap


def annotate(attributes: Attributes, name: str | None = None) -> None:
    """Add attributes to the current span (and rename it, e.g. `execute_tool search`)."""
    if not _switch["on"]:
        return
    current = trace.get_current_span()
    if current.is_recording():
        current.set_attributes(_clean(attributes))
        if name:
            current.update_name(name)


def content(text: str | None) -> str | None:
    """`text` when the operator opted in to exporting content, else None (the attribute is dropped)."""
    return text if _switch["content"] else None


def current_trace_id() -> str | None:
    """The current trace's id as 32 hex digits (as collectors show it), or None outside a trace."""
    if not _switch["on"]:
        return None
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else None


def inject_headers() -> dict[str, str]:
    """W3C trace-context headers of the current span, for a message or request another process
    continues (empty while tracing is off)."""
    carrier: dict[str, str] = {}
    if _switch["on"]:
        propagate.inject(carrier)
    return carrier


@contextlib.contextmanager
def continued(
    carrier: Mapping[str, Any] | None,
    name: str,
    attributes: Attributes | None = None,
    kind: trace.SpanKind = trace.SpanKind.INTERNAL,
) -> Iterator[Any]:
    """`span(name)` as a child of the trace whose headers `carrier` holds (from `inject_headers`)."""
    if not _switch["on"]:
        yield None
        return
    token = otel_context.attach(propagate.extract(dict(carrier or {})))
    try:
        with span(name, attributes, kind) as current:
            yield current
    finally:
        otel_context.detach(token)


def _clean(attributes: Attributes | None) -> dict[str, Any]:
    """OpenTelemetry refuses None values: drop them (content() returns None when content is off)."""
    return {k: v for k, v in (attributes or {}).items() if v is not None}
