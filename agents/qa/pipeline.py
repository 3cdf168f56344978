"""Grounded question answering: retrieve -> (no-answer gate) -> prompt -> generate or quote -> cite
-> check claims.

The pipeline is an async generator of events so that the API can stream them as they happen and
the non-streaming path is the same code run to the end:
  {"type": "sources", "query", "sources", "context"}  once, before any answer token; context:
   what the prompt holds and what was left out and why (context.py)
  {"type": "token", "text"} many
  {"type": "done", "answer", "citations", "invalid_citations", "usage", "timings", "grounded",
   "answer_mode_used", "quote_method", "fallback", "claims", "context", "model"}; model: the
   generator that wrote or chose the answer (None when nothing relevant was found: no model ran)

Answer modes (`AskRequest.answer_mode`, default `QASettings.answer_mode`): `generate` lets the model
write and then checks every sentence against its sources (claims.py); `quote` has it choose whole
source sentences under a grammar (quote.py); `auto` quotes when the generator is small.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from agents.qa.attribution import attribute
from agents.qa.citations import resolve_citations
from agents.qa.claims import Verifier, check_claims
from agents.qa.context import context_report
from agents.qa.followups import standalone
from agents.qa.prompt import (
    INSTRUCTIONS,
    NO_ANSWER,
    QUOTE_INSTRUCTIONS,
    build_messages,
    build_rewrite_messages,
)
from agents.qa.quote import (
    Similarity,
    assemble,
    candidates,
    first_choices,
    parse_quote,
    quote_grammar,
    quote_max_tokens,
    select_by_similarity,
)
from agents.qa.sources import Source, fit_to_budget, order_for_attention
from agents.qa.verify import engine_verifier
from core.settings.qa import QASettings
from core.tracing import traced
from inference.client import ChatBackend, Usage, complete_chat
from inference.grammar.spec import StructuredOutputSpec
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
    answer_mode: str | None = None  # quote | generate | auto; None: the settings' default
    claim_check: bool | None = None  # None: the settings' default
    sources_token_budget: int | None = None  # None: the settings' (a collection may set its own)
    rewrite_follow_up: bool | None = None  # None: the settings' rewrite_follow_ups


@dataclass
class Answer:
    """What generation produced, before the `done` event is built."""

    text: str
    citations: list[dict]
    invalid: list[int]
    usage: Usage
    finish_reason: str | None
    mode: str  # quote | generate
    quote_method: str | None = None  # grammar | embedding | lexical
    fallback: str | None = None  # why the requested way could not be used
    claims: list[dict] | None = None


class AskPipeline:
    """`similarity` (question, texts -> scores; the embedding model) ranks quote candidates and is the
    quote fallback without grammars; `verify` decides claims the lexical test cannot (default: a
    constrained yes/no from the generator)."""

    def __init__(
        self,
        retrieve: Retrieve,
        backend: ChatBackend,
        settings: QASettings,
        similarity: Similarity | None = None,
        verify: Verifier | None = None,
    ) -> None:
        self.retrieve, self.backend, self.settings = retrieve, backend, settings
        self.similarity = similarity
        self.verify = verify or engine_verifier(backend)

    def answer_mode(self, requested: str | None) -> str:
        """quote or generate: `auto` quotes when the generator is known to be small."""
        mode = requested or self.settings.answer_mode
        if mode != "auto":
            return mode
        size = getattr(self.backend, "num_parameters", None)
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
        result: list[Answer] = []
        if quoting:
            steps = self._quote(request, query, sources, history, result)
        else:
            steps = self._generate(request, sources, history, result)
        async for text in steps:
            if "ttft_ms" not in timings:
                timings["ttft_ms"] = (time.perf_counter() - gen_start) * 1000
            yield {"type": "token", "text": text}
        answer = result[0]
        timings["generation_ms"] = (time.perf_counter() - gen_start) * 1000
        check = self.settings.claim_check if request.claim_check is None else request.claim_check
        if answer.claims is None and check:
            check_start = time.perf_counter()
            answer.claims = await check_claims(
                answer.text,
                answer.citations,
                sources,
                self.verify,
                self.settings.claim_floor,
                self.settings.claim_copy,
            )
            timings["claim_check_ms"] = (time.perf_counter() - check_start) * 1000
        timings["total_ms"] = (time.perf_counter() - start) * 1000
        yield self._done(answer, timings, True, context)

    def _params(self, request: AskRequest, **overrides) -> SamplingParams:
        return SamplingParams(
            **{
                "max_tokens": request.max_tokens or self.settings.max_tokens,
                "temperature": self.settings.temperature
                if request.temperature is None
                else request.temperature,
                "seed": request.seed,
                "repetition_penalty": self.settings.repetition_penalty,
                "frequency_penalty": self.settings.frequency_penalty,
                "cache_salt": request.cache_salt,
                **overrides,
            }
        )

    async def _generate(
        self, request: AskRequest, sources: list[Source], history: list[dict], out: list[Answer]
    ) -> AsyncIterator[str]:
        """Free text from the model, streamed; markers resolved (and attributed) at the end."""
        parts: list[str] = []
        usage, finish_reason = Usage(), None
        messages = build_messages(request.question, sources, history)
        async for delta in self.backend.stream_chat(messages, self._params(request)):
            if delta.text:
                parts.append(delta.text)
                yield delta.text
            if delta.finished:
                usage, finish_reason = delta.usage or Usage(), delta.finish_reason
        text, attributed = attribute("".join(parts), sources)
        cited = resolve_citations(text, sources)
        for citation in cited.citations:
            citation["attributed"] = citation["source_number"] in attributed
        out.append(Answer(cited.answer, cited.citations, cited.invalid, usage, finish_reason, "generate"))

    async def _quote(
        self, request: AskRequest, query: str, sources: list[Source], history: list[dict], out: list[Answer]
    ) -> AsyncIterator[str]:
        """Whole source sentences chosen by the model under the quote grammar; streamed as they
        are generated when the backend enforces grammars, else checked first (see quote.py)."""
        s = self.settings
        cands = candidates(
            query, sources, s.quote_candidates, self.similarity, s.quote_max_sources, s.quote_rank_weight
        )
        if not cands:
            async for text in self._generate(request, sources, history, out):
                yield text
            out[0].fallback = "no source sentence can be quoted"
            return
        enforced = getattr(self.backend, "enforces_grammar", False)
        opening = first_choices(cands, s.quote_first_margin) if self.similarity is not None else None
        params = self._params(
            request,
            max_tokens=quote_max_tokens(cands, s.quote_max_sentences, self.backend.count_tokens),
            structured_output=StructuredOutputSpec(
                "grammar", ebnf=quote_grammar(cands, s.quote_max_sentences, opening)
            ),
        )
        messages = build_messages(request.question, sources, history, QUOTE_INSTRUCTIONS)
        parts: list[str] = []
        usage, finish_reason, fallback = Usage(), None, None
        try:
            async for delta in self.backend.stream_chat(messages, params):
                if delta.text:
                    parts.append(delta.text)
                    if enforced:
                        yield delta.text
                if delta.finished:
                    usage, finish_reason = delta.usage or Usage(), delta.finish_reason
        except Exception as exc:
            if enforced:
                raise
            fallback = f"the generator rejected the quote grammar ({type(exc).__name__})"
        chosen = None if fallback else parse_quote("".join(parts), cands)
        method = "grammar"
        if chosen is None:
            fallback = fallback or "the generator did not follow the quote grammar"
            chosen = select_by_similarity(cands, s.quote_max_sentences, s.quote_fallback_margin)
            method = "embedding" if self.similarity is not None else "lexical"
        text, citations, claims = assemble(chosen)
        if not enforced or fallback:
            yield text
        out.append(Answer(text, citations, [], usage, finish_reason, "quote", method, fallback, claims))

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
            "model": self.backend.model_name if grounded else None,
        }
