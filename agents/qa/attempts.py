"""One model's try at a grounded answer (a rung of the cascade, cascade.py): written (generate)
or chosen from the sources' sentences under a grammar (quote); the pipeline (pipeline.py) decides
which, and the cascade whether the try stands."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agents.qa.attribution import attribute
from agents.qa.citations import resolve_citations
from agents.qa.prompt import QUOTE_INSTRUCTIONS, build_messages
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
from agents.qa.sources import Source
from core.settings.qa import QASettings
from inference.client import Usage
from inference.grammar.spec import StructuredOutputSpec
from inference.protocol import SamplingParams
from inference.provider import Rung

if TYPE_CHECKING:
    from agents.qa.pipeline import AskRequest


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
    quote_score: float | None = None  # the quoted sentences' mean candidate score
    model: str | None = None  # set by the cascade: the model whose answer stood
    escalations: list[dict] = field(default_factory=list)


class Attempts:
    """`similarity` ranks quote candidates and is the quote fallback without grammars."""

    def __init__(self, settings: QASettings, similarity: Similarity | None = None) -> None:
        self.settings, self.similarity = settings, similarity

    def params(self, request: AskRequest, **overrides) -> SamplingParams:
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

    async def generate(
        self, rung: Rung, request: AskRequest, sources: list[Source], history: list[dict], out: list[Answer]
    ) -> AsyncIterator[str]:
        """Free text from the model, streamed; markers resolved (and attributed) at the end."""
        parts: list[str] = []
        usage, finish_reason = Usage(), None
        messages = build_messages(request.question, sources, history)
        params = self.params(request)
        if rung.max_tokens is not None:
            params = self.params(request, max_tokens=min(params.max_tokens, rung.max_tokens))
        async for delta in rung.backend.stream_chat(messages, params):
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

    async def quote(
        self,
        rung: Rung,
        request: AskRequest,
        query: str,
        sources: list[Source],
        history: list[dict],
        out: list[Answer],
    ) -> AsyncIterator[str]:
        """Whole source sentences chosen by the model under the quote grammar; streamed as they
        are generated when the backend enforces grammars, else checked first (see quote.py)."""
        s = self.settings
        cands = candidates(
            query, sources, s.quote_candidates, self.similarity, s.quote_max_sources, s.quote_rank_weight
        )
        if not cands:
            async for text in self.generate(rung, request, sources, history, out):
                yield text
            out[0].fallback = "no source sentence can be quoted"
            return
        backend = rung.backend
        enforced = getattr(backend, "enforces_grammar", False)
        opening = first_choices(cands, s.quote_first_margin) if self.similarity is not None else None
        params = self.params(
            request,
            max_tokens=quote_max_tokens(cands, s.quote_max_sentences, backend.count_tokens),
            structured_output=StructuredOutputSpec(
                "grammar", ebnf=quote_grammar(cands, s.quote_max_sentences, opening)
            ),
        )
        messages = build_messages(request.question, sources, history, QUOTE_INSTRUCTIONS)
        parts: list[str] = []
        usage, finish_reason, fallback = Usage(), None, None
        try:
            async for delta in backend.stream_chat(messages, params):
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
        score = sum(c.score for c in chosen) / len(chosen)
        out.append(
            Answer(text, citations, [], usage, finish_reason, "quote", method, fallback, claims, score)
        )
