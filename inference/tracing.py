"""Generation spans for callers that trace (OpenTelemetry's API only: the engine needs no platform code).

One `chat {model}` span per generation, with the GenAI semantic conventions' attributes (model,
tokens, finish reason), made only when the caller's current span is recording, so an untraced call
costs one lookup. For the in-process engine it gets three children drawn from the request's own
timeline: `engine.queue` (call to first scheduling), `engine.prefill` (to the first token) and
`engine.decode` (to the last). Prompts and outputs are never put on these spans.
"""

from __future__ import annotations

import time

from opentelemetry import trace

from inference.protocol import SamplingParams

_tracer = trace.get_tracer("groundwork.inference")


class GenerationSpan:
    def __init__(self, model: str, params: SamplingParams, request_id: str, provider: str) -> None:
        self.span = None
        if not trace.get_current_span().is_recording():
            return
        self.start_ns = time.time_ns()
        self.first_token_ns: int | None = None
        self.span = _tracer.start_span(
            f"chat {model}",
            kind=trace.SpanKind.CLIENT,
            start_time=self.start_ns,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": provider,
                "gen_ai.request.model": model,
                "gen_ai.request.max_tokens": params.max_tokens,
                "gen_ai.request.temperature": params.temperature,
                "gen_ai.request.top_p": params.top_p,
                "gen_ai.response.id": request_id,
                "groundwork.structured_output": params.structured_output is not None,
            },
        )

    def token(self) -> None:
        if self.span is not None and self.first_token_ns is None:
            self.first_token_ns = time.time_ns()

    def finish(
        self,
        finish_reason: str | None,
        input_tokens: int,
        output_tokens: int,
        cached_tokens: int = 0,
        scheduled_at: float | None = None,
    ) -> None:
        if self.span is None:
            return
        end = time.time_ns()
        self.span.set_attributes(
            {
                "gen_ai.response.finish_reasons": [finish_reason or "unknown"],
                "gen_ai.usage.input_tokens": input_tokens,
                "gen_ai.usage.output_tokens": output_tokens,
                "gen_ai.usage.cache_read.input_tokens": cached_tokens,
            }
        )
        if scheduled_at is not None:
            first = self.first_token_ns or end
            scheduled = min(max(int(scheduled_at * 1e9), self.start_ns), first)
            parent = trace.set_span_in_context(self.span)
            for name, start, stop in (
                ("engine.queue", self.start_ns, scheduled),
                ("engine.prefill", scheduled, first),
                ("engine.decode", first, end),
            ):
                _tracer.start_span(name, context=parent, start_time=start).end(end_time=stop)
        self.span.end(end_time=end)
        self.span = None

    def fail(self, error: BaseException) -> None:
        if self.span is None:
            return
        self.span.record_exception(error)
        self.span.set_status(trace.Status(trace.StatusCode.ERROR, type(error).__name__))
        self.span.set_attribute("error.type", type(error).__name__)
        self.span.end()
        self.span = None
