"""Sources: the retrieved chunks an answer may cite, and how they are laid out in the prompt."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Source:
    """One retrieved chunk, as shown to the model under the marker `[number]`."""

    number: int
    chunk_id: str
    document_id: str
    title: str
    text: str
    score: float
    page: int | None = None
    char_start: int | None = None
    char_end: int | None = None
    source_id: str = ""  # the document's source (file name, URL, id given at upload)
    rank: int = 0  # place in the retrieval ranking, 0 = best (numbers follow the prompt's layout)
    headings: tuple[str, ...] = ()  # the chunk's section path (quote mode never quotes a heading)
    # The document's text just before and after `text` ("" at its start/end; None: not looked up),
    # which tells whether the chunk's first and last sentences are whole (boundaries.py).
    lead: str | None = None
    trail: str | None = None

    def as_dict(self) -> dict:
        return {
            "number": self.number,
            "chunk_id": self.chunk_id,
            "document_id": self.document_id,
            "title": self.title,
            "source_id": self.source_id,
            "page": self.page,
            "char_start": self.char_start,
            "char_end": self.char_end,
            "score": self.score,
            "text": self.text,
        }


def fit_to_budget(
    ranked: list[Source], budget_tokens: int, count_tokens: Callable[[str], int]
) -> list[Source]:
    """Keep the best-ranked sources whose rendered text fits in `budget_tokens` (generator tokens)."""
    kept: list[Source] = []
    used = 0
    for source in ranked:
        cost = count_tokens(render_source(source))
        if used + cost > budget_tokens:
            continue  # a shorter, lower-ranked source may still fit
        kept.append(source)
        used += cost
    return kept


def order_for_attention(ranked: list[Source]) -> list[Source]:
    """Best sources at both ends, weakest in the middle (models attend least to the middle).

    Ranks 1, 3, 5, ... go from the start, ranks 2, 4, 6, ... from the end; numbers are then given
    in presentation order so the prompt reads [1], [2], ... top to bottom.
    """
    front = ranked[0::2]
    back = ranked[1::2][::-1]
    ordered = front + back
    for number, source in enumerate(ordered, start=1):
        source.number = number
    return ordered


def render_source(source: Source) -> str:
    where = f", page {source.page}" if source.page is not None else ""
    return f"[{source.number}] {source.title}{where}\n{source.text.strip()}\n"
