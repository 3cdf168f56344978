"""Citations: parse `[n]` markers from an answer, check them against the sources, renumber them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from agents.qa.sources import Source

# One bracket group may hold several numbers: [1], [1, 2], [1,2,3].
_MARKER = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")


@dataclass
class CitationResult:
    answer: str  # markers renumbered 1, 2, ... in order of first appearance; invalid ones removed
    citations: list[dict]  # one per cited source, in citation-number order
    invalid: list[int]  # marker numbers that pointed at no source (dropped)


def resolve_citations(answer: str, sources: list[Source]) -> CitationResult:
    by_number = {s.number: s for s in sources}
    renumber: dict[int, int] = {}
    invalid: list[int] = []

    def replace(match: re.Match) -> str:
        kept = []
        for raw in match.group(1).split(","):
            number = int(raw)
            if number not in by_number:
                if number not in invalid:
                    invalid.append(number)
                continue
            renumber.setdefault(number, len(renumber) + 1)
            kept.append(f"[{renumber[number]}]")
        return "".join(dict.fromkeys(kept))

    rewritten = _MARKER.sub(replace, answer)
    rewritten = re.sub(r"[ \t]+([.,;:!?])", r"\1", rewritten)  # no space left before punctuation
    citations = []
    for number, cited in sorted(renumber.items(), key=lambda kv: kv[1]):
        citations.append(citation_entry(by_number[number], cited))
    return CitationResult(answer=rewritten, citations=citations, invalid=invalid)


def citation_entry(source: Source, citation: int) -> dict:
    """What the answer's marker `[citation]` points at."""
    return {"citation": citation, "source_number": source.number, **source.as_dict(), "quote": source.text}
