"""Neighbouring-chunk expansion: a hit is widened to the chunks around it in its document, so that
an answer sitting just before or after the matching passage still reaches the generator."""

from __future__ import annotations

import uuid
from dataclasses import replace

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from agents.qa.sources import Source
from core.models import Chunk
from core.tracing import traced


def _merge(rows: list) -> tuple[str, int, int]:
    """One text from consecutive chunks (ordinal order); overlapping windows are not repeated."""
    text, end = rows[0].text, rows[0].char_end
    for row in rows[1:]:
        if row.char_start < end:
            text += row.text[end - row.char_start :]
        else:
            text += "\n" + row.text  # a segment boundary: the gap is whitespace in the document
        end = max(end, row.char_end)
    return text, rows[0].char_start, end


@traced("retrieval.neighbors")
def expand_neighbors(session: Session, sources: list[Source], radius: dict[str, int]) -> list[Source]:
    """Each source widened by `radius[chunk_id]` chunks on either side, best-ranked first.

    NOTE: a chunk belongs to at most one widened source; a hit already inside a better one's window
    is dropped (its text is there), so widening never repeats text in the prompt.
    """
    if not any(radius.get(s.chunk_id, 0) for s in sources):
        return sources
    ids = [uuid.UUID(s.chunk_id) for s in sources]
    where = {
        str(r.id): (r.document_id, r.ordinal)
        for r in session.execute(select(Chunk.id, Chunk.document_id, Chunk.ordinal).where(Chunk.id.in_(ids)))
    }
    wanted = {
        (doc, ordinal + k)
        for s in sources
        if s.chunk_id in where
        for doc, ordinal in [where[s.chunk_id]]
        for k in range(-radius.get(s.chunk_id, 0), radius.get(s.chunk_id, 0) + 1)
    }
    rows = {
        (r.document_id, r.ordinal): r
        for r in session.execute(
            select(Chunk.document_id, Chunk.ordinal, Chunk.text, Chunk.char_start, Chunk.char_end).where(
                tuple_(Chunk.document_id, Chunk.ordinal).in_(list(wanted))
            )
        )
    }
    taken: set[tuple] = set()
    out: list[Source] = []
    for source in sources:
        if source.chunk_id not in where:
            out.append(source)
            continue
        doc, ordinal = where[source.chunk_id]
        if (doc, ordinal) in taken:
            continue
        r = radius.get(source.chunk_id, 0)
        lo = ordinal
        while lo - 1 >= ordinal - r and (doc, lo - 1) in rows and (doc, lo - 1) not in taken:
            lo -= 1
        hi = ordinal
        while hi + 1 <= ordinal + r and (doc, hi + 1) in rows and (doc, hi + 1) not in taken:
            hi += 1
        window = [rows[(doc, k)] for k in range(lo, hi + 1)]
        taken.update((doc, k) for k in range(lo, hi + 1))
        text, start, end = _merge(window)
        out.append(replace(source, text=text, char_start=start, char_end=end))
    return out
