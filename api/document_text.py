"""A document's parsed text put back together from its chunks (REST `/text`, MCP `read_document`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from core.models import Chunk


@dataclass
class ParsedText:
    text: str
    uncovered_chars: int  # characters between chunks, shown as spaces
    chunks: list[Chunk]  # in ordinal order


def parsed_text(session: Session, document_id: uuid.UUID) -> ParsedText:
    """NOTE: the parsed text is not stored; it is put back together from the chunks, which works
    because each chunk's text is exactly parsed_text[char_start:char_end] (overlaps agree)."""
    chunks = list(
        session.execute(select(Chunk).where(Chunk.document_id == document_id).order_by(Chunk.char_start))
        .scalars()
        .all()
    )
    parts: list[str] = []
    end, uncovered = 0, 0
    for chunk in chunks:
        if chunk.char_start > end:
            parts.append(" " * (chunk.char_start - end))
            uncovered += chunk.char_start - end
        if chunk.char_end > end:
            parts.append(chunk.text[max(0, end - chunk.char_start) :])
            end = chunk.char_end
    return ParsedText("".join(parts), uncovered, sorted(chunks, key=lambda c: c.ordinal))
