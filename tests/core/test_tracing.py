"""Tracing off costs nothing: no spans, no trace ids, no headers; on, spans nest and content is
dropped unless opted in."""

from __future__ import annotations

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from core.settings.observability import TracingSettings
from core.tracing import (
    annotate,
    configure_tracing,
    content,
    continued,
    current_trace_id,
    disable_tracing,
    inject_headers,
    span,
    traced,
)


@traced("unit.work")
def work() -> str | None:
    annotate({"unit.text": content("secret words"), "unit.n": 3})
    return current_trace_id()


def test_off_makes_nothing():
    disable_tracing()
    with span("unit.off") as s:
        assert s is None
        assert work() is None and inject_headers() == {}
    assert configure_tracing(TracingSettings(), "unit") is None  # not enabled: nothing installed


def test_on_nests_spans_and_drops_content():
    memory = InMemorySpanExporter()
    configure_tracing(TracingSettings(enabled=True), "unit", exporter=memory)
    try:
        with span("unit.outer"):
            trace_id = work()
            headers = inject_headers()
        with continued(headers, "unit.remote"):
            pass
    finally:
        disable_tracing()
    spans = {s.name: s for s in memory.get_finished_spans()}
    assert spans["unit.work"].parent.span_id == spans["unit.outer"].context.span_id
    assert format(spans["unit.outer"].context.trace_id, "032x") == trace_id
    assert spans["unit.remote"].parent.span_id == spans["unit.outer"].context.span_id
    assert dict(spans["unit.work"].attributes) == {"unit.n": 3}  # the text was not opted in
