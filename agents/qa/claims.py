"""Claim check: is each sentence of an answer supported by the source it cites?

For every sentence of the (renumbered) answer: the sources it cites, or every source when it cites
none; in them, the evidence span (one sentence or two neighbouring ones) sharing most of the
sentence's content words. A sentence citing several sources is covered by their best spans
together (`joint_coverage`). Then, cheapest first:

- a figure or a name the sources never state, or coverage under `floor`: unsupported (lexical);
- coverage at or over `copy`: supported (the sentence is essentially copied; lexical);
- otherwise the verifier decides (an entailment model if configured, else a constrained yes/no
  from the generator); a verifier that cannot say gives `unknown`.

`supported` is true, false or null (unknown); `verdict` spells the same as a word for display.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from agents.qa.sentences import content_words, sentence_spans
from agents.qa.sources import Source
from core.tracing import traced

# Evidence text and claim -> True (supported), False, or None (cannot tell).
Verifier = Callable[[str, str], Awaitable[bool | None]]

_MARKER = re.compile(r"\s*\[(\d+(?:\s*,\s*\d+)*)\]")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_NAME = re.compile(r"\b\w[\w-]*")


@dataclass
class Evidence:
    source: Source
    start: int  # offsets in source.text
    end: int
    coverage: float  # share of the claim's content words found in the span

    def as_dict(self, citation: int | None) -> dict:
        base = self.source.char_start
        return {
            "source_number": self.source.number,
            "citation": citation,
            "chunk_id": self.source.chunk_id,
            "text": self.source.text[self.start : self.end],
            "start": self.start,
            "end": self.end,
            # In the document's parsed text, where the chunk's own offsets are known.
            "char_start": None if base is None else base + self.start,
            "char_end": None if base is None else base + self.end,
        }


def best_evidence(claim: str, sources: list[Source]) -> Evidence | None:
    """The span of one or two neighbouring sentences covering most of the claim's content words."""
    words = content_words(claim)
    best: Evidence | None = None
    for source in sources:
        spans = sentence_spans(source.text)
        windows = spans + [(a[0], b[1]) for a, b in zip(spans, spans[1:], strict=False)]
        for start, end in windows:
            found = len(words & content_words(source.text[start:end])) / (len(words) or 1)
            # Ties go to the shorter span: the single sentence beats the pair that contains it.
            if (
                best is None
                or found > best.coverage + 1e-9
                or (abs(found - best.coverage) < 1e-9 and end - start < best.end - best.start)
            ):
                best = Evidence(source, start, end, found)
    return best


def _figures(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(text)}


def _names(text: str) -> set[str]:
    """Capitalised words not starting a sentence: names, places, products."""
    names = set()
    for start, end in sentence_spans(text):
        names.update(w.lower() for w in _NAME.findall(text[start:end])[1:] if w[0].isupper())
    return names


def invented(claim: str, sources: list[Source]) -> bool:
    """Whether the claim states a figure or a name that none of `sources` mentions: the surest
    sign of an invented fact, however many other words it copies."""
    said = " ".join(s.text for s in sources)
    lowered = {w.lower() for w in _NAME.findall(said)}
    return bool(_figures(claim) - _figures(said)) or bool(_names(claim) - lowered)


def joint_coverage(claim: str, sources: list[Source]) -> float:
    """The share of the claim's content words found in the best span of one source or another."""
    words = content_words(claim)
    found: set[str] = set()
    for source in sources:
        if (evidence := best_evidence(claim, [source])) is not None:
            found |= words & content_words(source.text[evidence.start : evidence.end])
    return len(found) / (len(words) or 1)


async def check_sentence(
    claim: str,
    sources: list[Source],
    verify: Verifier | None,
    floor: float,
    copy: float,
    together: bool = False,
) -> tuple[bool | None, str, Evidence | None]:
    """(supported, method, evidence) of one claim against `sources`; `together`: the claim cites
    them all, so its words may come from any of them (the evidence is still the best single span)."""
    if len(content_words(claim)) < 2:
        return None, "too_short", None
    evidence = best_evidence(claim, sources)
    if evidence is None:
        return False, "lexical", None
    if together:
        # NOTE: "X is a town [1]; Y is a river [2]" joins two facts in one sentence; no one span of
        # either source holds half of its words (agent answers naming two things measured so).
        evidence = replace(evidence, coverage=joint_coverage(claim, sources))
    if invented(claim, sources):
        return False, "lexical", evidence
    if evidence.coverage < floor:
        return False, "lexical", evidence
    if evidence.coverage >= copy:
        return True, "lexical", evidence
    if verify is None:
        return None, "unverified", evidence
    # The verifier reads the whole chunk: the claim may combine facts from several of its sentences.
    return await verify(evidence.source.text, claim), "model", evidence


def split_markers(sentence: str) -> tuple[str, list[int]]:
    """The sentence without its citation markers, and the citation numbers they hold ([1], [1, 2])."""
    cited = [int(n) for group in _MARKER.findall(sentence) for n in group.split(",")]
    return _MARKER.sub("", sentence).strip(), cited


@traced("qa.claim_check")
async def check_claims(
    answer: str,
    citations: list[dict],
    sources: list[Source],
    verify: Verifier | None,
    floor: float = 0.5,
    copy: float = 0.85,
    answer_cites: list[Source] | None = None,
) -> list[dict]:
    """One entry per sentence of `answer` (markers are citation numbers, as `resolve_citations` left
    them). `answer_cites`: the sources the answer as a whole rests on (an agent's final_answer names
    them apart from its text): a sentence without markers cites them; else it is checked against
    every source."""
    by_citation = {c["citation"]: c["source_number"] for c in citations}
    by_number = {s.number: s for s in sources}
    claims = []
    for start, end in sentence_spans(answer):
        sentence = answer[start:end]
        text, cited = split_markers(sentence)
        cited_sources = [by_number[by_citation[c]] for c in dict.fromkeys(cited) if c in by_citation]
        cited_sources = cited_sources or answer_cites or []
        supported, method, evidence = await check_sentence(
            text, cited_sources or sources, verify, floor, copy, together=len(cited_sources) > 1
        )
        citation = None
        if evidence is not None:
            citation = next((c for c, n in by_citation.items() if n == evidence.source.number), None)
        claims.append(claim_entry(sentence, start, end, cited, supported, method, evidence, citation))
    return claims


def claim_entry(
    sentence: str,
    start: int,
    end: int,
    cited: list[int],
    supported: bool | None,
    method: str,
    evidence: Evidence | None,
    citation: int | None,
) -> dict:
    verdict = {True: "supported", False: "unsupported", None: "unknown"}[supported]
    return {
        "text": sentence,
        "start": start,  # offsets in the answer
        "end": end,
        "citations": cited,
        "supported": supported,
        "verdict": verdict,
        "method": method,  # quote | lexical | model | too_short | unverified
        "coverage": None if evidence is None else round(evidence.coverage, 3),
        "evidence": None if evidence is None else evidence.as_dict(citation),
    }
