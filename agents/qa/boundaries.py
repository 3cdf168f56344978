"""The document text around each source, so quote mode can tell a whole sentence from the piece of
one that a chunk boundary cut (`sentences.is_whole`)."""

from __future__ import annotations

import uuid
from dataclasses import replace

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from agents.qa.sources import Source
from core.models import Chunk

CONTEXT_CHARS = 40  # enough to see the end of the sentence before, or the start of the next


def with_document_context(session: Session, sources: list[Source]) -> list[Source]:
    """`sources` with `lead` and `trail` set from the chunks that overlap their edges, in one query.

    NOTE: chunk offsets index the parsed document, so a chunk covering offset `char_start - 1` holds
    the text just before a source. Where no chunk covers it the document starts there ("") or a
    segment boundary (whitespace in the document) lies there ("\\n"): either way a sentence starts.
    """
    placed = [s for s in sources if s.char_start is not None and s.char_end is not None]
    if not placed:
        return sources
    edges = [
        and_(
            Chunk.document_id == uuid.UUID(s.document_id),
            or_(
                and_(Chunk.char_start < s.char_start, Chunk.char_end >= s.char_start),
                and_(Chunk.char_start <= s.char_end, Chunk.char_end > s.char_end),
            ),
        )
        for s in placed
    ]
    rows = session.execute(
        select(Chunk.document_id, Chunk.char_start, Chunk.char_end, Chunk.text).where(or_(*edges))
    ).all()
    out = []
    for source in sources:
        if source not in placed:
            out.append(source)
            continue
        start, end = source.char_start, source.char_end
        lead = "" if start == 0 else "\n"
        trail = ""
        for row in rows:
            if str(row.document_id) != source.document_id:
                continue
            if row.char_start < start <= row.char_end:
                lead = row.text[max(0, start - CONTEXT_CHARS - row.char_start) : start - row.char_start]
            if row.char_start <= end < row.char_end:
                trail = row.text[end - row.char_start : end - row.char_start + CONTEXT_CHARS]
        out.append(replace(source, lead=lead, trail=trail))
    return out
