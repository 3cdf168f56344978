"""Grounded question answering: retrieve -> (no-answer gate) -> prompt -> generate -> cite.

The pipeline is an async generator of events so that the API can stream them as they happen and
the non-streaming path is the same code run to the end:
  {"type": "sources", ...}  once, before any answer token
  {"type": "token", "text"} many
  {"type": "done", "answer", "citations", "invalid_citations", "usage", "timings", "grounded"}
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from agents.qa.attribution import attribute
from agents.qa.citations import resolve_citations
from agents.qa.prompt import NO_ANSWER, build_messages, build_rewrite_messages
from agents.qa.sources import Source, fit_to_budget, order_for_attention
from core.settings.qa import QASettings
from inference.client import ChatBackend, Usage, complete_chat
from inference.protocol import SamplingParams

# Given a stand-alone query, the ranked sources (best first) and retrieval timings in ms.
Retrieve = Callable[[str], Awaitable[tuple[list[Source], dict[str, float]]]]


@dataclass
class AskRequest:
    question: str
    history: list[dict] = field(default_factory=list)  # prior turns: {"role", "content"}
    max_tokens: int | None = None
    temperature: float | None = None
    seed: int | None = None
    # Prefix-cache isolation: requests share cached prompt blocks only within one salt (tenant).
    cache_salt: str | None = None


class AskPipeline:
    def __init__(self, retrieve: Retrieve, backend: ChatBackend, settings: QASettings) -> None:
        self.retrieve, self.backend, self.settings = retrieve, backend, settings

    async def standalone_query(self, request: AskRequest) -> str:
        if not (request.history and self.settings.rewrite_follow_ups):
            return request.question
        messages = build_rewrite_messages(request.question, request.history)
        text, _ = await complete_chat(self.backend, messages, SamplingParams(max_tokens=48, temperature=0.0))
        return text.strip().splitlines()[0].strip() if text.strip() else request.question

    def _grounded(self, sources: list[Source]) -> bool:
        if not self.settings.refuse_without_sources:
            return True
        return bool(sources) and max(s.score for s in sources) >= self.settings.min_relevance

    async def run(self, request: AskRequest) -> AsyncIterator[dict]:
        start = time.perf_counter()
        timings: dict[str, float] = {}
        query = await self.standalone_query(request)
        timings["rewrite_ms"] = (time.perf_counter() - start) * 1000
        ranked, retrieval_timings = await self.retrieve(query)
        timings.update(retrieval_timings)
        sources = order_for_attention(
            fit_to_budget(ranked, self.settings.sources_token_budget, self.backend.count_tokens)
        )
        yield {"type": "sources", "query": query, "sources": [s.as_dict() for s in sources]}

        if not self._grounded(sources):
            yield {"type": "token", "text": NO_ANSWER}
            timings["total_ms"] = (time.perf_counter() - start) * 1000
            yield self._done(NO_ANSWER, [], [], Usage(), timings, grounded=False, finish_reason="stop")
            return

        history = request.history[-self.settings.history_turns :] if request.history else []
        params = SamplingParams(
            max_tokens=request.max_tokens or self.settings.max_tokens,
            temperature=self.settings.temperature if request.temperature is None else request.temperature,
            seed=request.seed,
            repetition_penalty=self.settings.repetition_penalty,
            frequency_penalty=self.settings.frequency_penalty,
            cache_salt=request.cache_salt,
        )
        gen_start = time.perf_counter()
        parts: list[str] = []
        usage, finish_reason = Usage(), None
        async for delta in self.backend.stream_chat(
            build_messages(request.question, sources, history), params
        ):
            if delta.text:
                if not parts:
                    timings["ttft_ms"] = (time.perf_counter() - gen_start) * 1000
                parts.append(delta.text)
                yield {"type": "token", "text": delta.text}
            if delta.finished:
                usage, finish_reason = delta.usage or Usage(), delta.finish_reason
        timings["generation_ms"] = (time.perf_counter() - gen_start) * 1000
        timings["total_ms"] = (time.perf_counter() - start) * 1000
        answer, attributed = attribute("".join(parts), sources)
        cited = resolve_citations(answer, sources)
        for citation in cited.citations:
            citation["attributed"] = citation["source_number"] in attributed
        yield self._done(cited.answer, cited.citations, cited.invalid, usage, timings, True, finish_reason)

    @staticmethod
    def _done(answer, citations, invalid, usage: Usage, timings, grounded: bool, finish_reason) -> dict:
        return {
            "type": "done",
            "answer": answer,
            "citations": citations,
            "invalid_citations": invalid,
            "usage": usage.as_dict(),
            "timings": {k: round(v, 1) for k, v in timings.items()},
            "grounded": grounded,
            "finish_reason": finish_reason,
        }
