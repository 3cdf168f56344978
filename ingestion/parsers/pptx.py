"""PPTX via python-pptx: one segment per slide (page = slide number, heading = the slide's title),
shapes in reading order (top to bottom, then left to right; groups opened), tables as table
segments, and the speaker notes after the slide's own text."""

from __future__ import annotations

import io
import logging
import zipfile

from pptx import Presentation
from pptx.exc import PackageNotFoundError

from ingestion.errors import PermanentError
from ingestion.parsers.base import ParsedDocument, TextBuilder
from ingestion.parsers.detect import MIME
from ingestion.parsers.tables import TableBlocks

log = logging.getLogger(__name__)


def _cell(cell) -> str:
    return " ".join(cell.text.replace("|", "/").split())


def _ordered(shapes) -> list:
    return sorted(shapes, key=lambda s: ((s.top or 0), (s.left or 0)))


def _emit(shapes, blocks: TableBlocks, path: tuple[str, ...], page: int, budget: list[int]) -> None:
    for shape in _ordered(shapes):
        if shape.shape_type is not None and getattr(shape, "shapes", None) is not None:  # a group
            _emit(shape.shapes, blocks, path, page, budget)
        elif getattr(shape, "has_table", False) and shape.has_table:
            rows = [" | ".join(_cell(c) for c in row.cells) for row in shape.table.rows]
            budget[0] -= sum(map(len, rows))
            blocks.table(rows, path, page)
        elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
            text = shape.text_frame.text
            budget[0] -= len(text)
            blocks.paragraph(text, path, page)
        if budget[0] < 0:
            raise PermanentError(
                "the presentation holds more text than the parsed-text limit", "text_too_large"
            )


def parse_pptx(data: bytes, max_chars: int = 50_000_000) -> ParsedDocument:
    try:
        deck = Presentation(io.BytesIO(data))
    except (zipfile.BadZipFile, KeyError, ValueError, PackageNotFoundError) as exc:
        log.warning("corrupt PPTX: %s: %s", type(exc).__name__, exc)
        raise PermanentError("corrupt PPTX", "corrupt_file") from None
    builder = TextBuilder()
    blocks = TableBlocks(builder)
    budget = [max_chars]
    for number, slide in enumerate(deck.slides, start=1):
        title_shape = slide.shapes.title
        title = (title_shape.text_frame.text.strip() if title_shape is not None else "") or f"Slide {number}"
        _emit(slide.shapes, blocks, (title,), number, budget)
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                builder.add("Notes: " + notes, page=number, heading_path=(title,), notes=True)
    title = deck.core_properties.title or ""
    return ParsedDocument(builder.text, builder.segments, "pptx", MIME["pptx"], title)
