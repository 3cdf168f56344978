"""Grounded question answering: retrieve -> (no-answer gate) -> prompt -> generate or quote -> cite
-> check claims.

The pipeline is an async generator of events so that the API can stream them as they happen and
the non-streaming path is the same code run to the end:
  {"type": "sources", "query", "sources", "context"}  once, before any answer token; context:
   what the prompt holds and what was left out and why (context.py)
  {"type": "token", "text"} many
  {"type": "done", "answer", "citations", "invalid_citations", "usage", "timings", "grounded",
   "answer_mode_used", "quote_method", "fallback", "claims", "context", "model", "escalations"};
   model: the generator that wrote or chose the answer (None when nothing relevant was found: no
   model ran); escalations: `{from, reason}` per cascade model whose answer was weak (cascade.py)

Answer modes (`AskRequest.answer_mode`, default `QASettings.answer_mode`): `generate` lets the model
write and then checks every sentence against its sources (claims.py); `quote` has it choose whole
source sentences under a grammar (quote.py); `auto` quotes when the generator is small.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from agents.qa.attempts import Answer, Attempts
from agents.qa.cascade import cascade, weakness
from agents.qa.claims import Verifier, check_claims
from agents.qa.context import context_report
from agents.qa.followups import standalone
from agents.qa.prompt import INSTRUCTIONS, NO_ANSWER, QUOTE_INSTRUCTIONS, build_rewrite_messages
from agents.qa.quote import Similarity
from agents.qa.sources import Source, fit_to_budget, order_for_attention
from agents.qa.verify import engine_verifier
from core.settings.qa import QASettings
from core.tracing import traced
from inference.client import ChatBackend, Usage, complete_chat
from inference.protocol import SamplingParams
from inference.provider import Rung

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
    answer_mode: str | None = None  # quote | generate | auto; None: the settings' default
    claim_check: bool | None = None  # None: the settings' default
    sources_token_budget: int | None = None  # None: the settings' (a collection may set its own)
    rewrite_follow_up: bool | None = None  # None: the settings' rewrite_follow_ups


class AskPipeline:
    """`similarity` (question, texts -> scores; the embedding model) ranks quote candidates and is the
    quote fallback without grammars; `verify` decides claims the lexical test cannot (default: a
    constrained yes/no from the generator). `rungs`: the cascade (cascade.py) that answers, smallest
    first; default: `backend` alone. `backend` also rewrites follow-ups and counts prompt tokens."""

    def __init__(
        self,
        retrieve: Retrieve,
        backend: ChatBackend,
        settings: QASettings,
        similarity: Similarity | None = None,
        verify: Verifier | None = None,
        rungs: list[Rung] | None = None,
    ) -> None:
        self.retrieve, self.backend, self.settings = retrieve, backend, settings
        self.rungs = rungs or [Rung(backend.model_name, backend)]
        self.attempts = Attempts(settings, similarity)
        self.verify = verify or engine_verifier(backend)

    def answer_mode(self, requested: str | None, backend: ChatBackend | None = None) -> str:
        """quote or generate: `auto` quotes when the generator (`backend`, default the first) is
        known to be small."""
        mode = requested or self.settings.answer_mode
        if mode != "auto":
            return mode
        size = getattr(backend or self.backend, "num_parameters", None)
        return "quote" if size is not None and size <= self.settings.quote_max_params else "generate"

    @traced("qa.rewrite")
    async def standalone_query(self, request: AskRequest) -> str:
        rewrite = request.rewrite_follow_up
        if not (request.history and (self.settings.rewrite_follow_ups if rewrite is None else rewrite)):
            return request.question
        messages = build_rewrite_messages(request.question, request.history)
        text, _ = await complete_chat(self.backend, messages, SamplingParams(max_tokens=48, temperature=0.0))
        return standalone(request.question, text, request.history)[0]

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
        budget = request.sources_token_budget or self.settings.sources_token_budget
        sources = order_for_attention(fit_to_budget(ranked, budget, self.backend.count_tokens))
        history = request.history[-self.settings.history_turns :] if request.history else []
        quoting = self.answer_mode(request.answer_mode) == "quote"
        context = context_report(
            QUOTE_INSTRUCTIONS if quoting else INSTRUCTIONS,
            request.question,
            history,
            len(request.history) - len(history),
            sources,
            ranked,
            budget,
            self.backend.count_tokens,
        )
        yield {
            "type": "sources",
            "query": query,
            "sources": [s.as_dict() for s in sources],
            "context": context,
        }

        if not self._grounded(sources):
            yield {"type": "token", "text": NO_ANSWER}
            timings["total_ms"] = (time.perf_counter() - start) * 1000
            mode = "quote" if quoting else "generate"
            yield self._done(
                Answer(NO_ANSWER, [], [], Usage(), "stop", mode, claims=[]), timings, False, context
            )
            return

        gen_start = time.perf_counter()

        def attempt(rung: Rung, out: list[Answer]) -> AsyncIterator[str]:
            if self.answer_mode(request.answer_mode, rung.backend) == "quote":
                return self.attempts.quote(rung, request, query, sources, history, out)
            return self.attempts.generate(rung, request, sources, history, out)

        async def judge(answer: Answer, last: bool) -> str | None:
            check = self.settings.claim_check if request.claim_check is None else request.claim_check
            claims = answer.claims
            if claims is None and (check or not last):
                check_start = time.perf_counter()
                claims = await check_claims(
                    answer.text,
                    answer.citations,
                    sources,
                    self.verify,
                    self.settings.claim_floor,
                    self.settings.claim_copy,
                )
                timings["claim_check_ms"] = (
                    timings.get("claim_check_ms", 0.0) + (time.perf_counter() - check_start) * 1000
                )
                answer.claims = claims if check else None
            best = max((s.score for s in sources), default=0.0)
            return None if last else weakness(answer, claims, best, self.settings, query)

        answer = None
        async for piece in cascade(self.rungs, attempt, judge):
            if isinstance(piece, Answer):
                answer = piece
                continue
            if "ttft_ms" not in timings:
                timings["ttft_ms"] = (time.perf_counter() - gen_start) * 1000
            yield {"type": "token", "text": piece}
        assert answer is not None
        timings["generation_ms"] = (time.perf_counter() - gen_start) * 1000 - timings.get("claim_check_ms", 0)
        timings["total_ms"] = (time.perf_counter() - start) * 1000
        yield self._done(answer, timings, True, context)

    def _done(self, answer: Answer, timings: dict[str, float], grounded: bool, context: dict) -> dict:
        return {
            "type": "done",
            "answer": answer.text,
            "citations": answer.citations,
            "invalid_citations": answer.invalid,
            "usage": answer.usage.as_dict(),
            "timings": {k: round(v, 1) for k, v in timings.items()},
            "grounded": grounded,
            "finish_reason": answer.finish_reason,
            "answer_mode_used": answer.mode,
            "quote_method": answer.quote_method,
            "fallback": answer.fallback,
            "claims": answer.claims,
            "context": context,
            "model": answer.model if grounded else None,
            "escalations": answer.escalations,
        }
