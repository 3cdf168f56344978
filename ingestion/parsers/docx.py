"""DOCX via python-docx: paragraphs and tables in body order; "Heading N"/"Title" styles give paths."""

from __future__ import annotations

import io
import logging
import re
import zipfile

import docx
from docx.table import Table
from docx.text.paragraph import Paragraph

from ingestion.errors import PermanentError
from ingestion.parsers.base import ParsedDocument, TextBuilder
from ingestion.parsers.detect import MIME

log = logging.getLogger(__name__)
_HEADING = re.compile(r"^heading (\d)$", re.I)


def _heading_level(paragraph: Paragraph) -> int | None:
    name = (paragraph.style.name if paragraph.style is not None else "") or ""
    if name.lower() == "title":
        return 1
    match = _HEADING.match(name)
    return int(match.group(1)) if match else None


def _table_text(table: Table) -> str:
    rows = []
    for row in table.rows:
        cells = [cell.text.strip() for cell in row.cells]
        rows.append(" | ".join(cells))
    return "\n".join(rows)


def parse_docx(data: bytes) -> ParsedDocument:
    try:
        document = docx.Document(io.BytesIO(data))
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        log.warning("corrupt DOCX: %s: %s", type(exc).__name__, exc)
        raise PermanentError("corrupt DOCX", "corrupt_file") from None
    builder = TextBuilder()
    stack: list[tuple[int, str]] = []
    for item in document.iter_inner_content():
        if isinstance(item, Table):
            builder.add(_table_text(item), heading_path=tuple(h for _, h in stack))
            continue
        level = _heading_level(item)
        text = item.text.strip()
        if level is not None and text:
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, text))
        builder.add(text, heading_path=tuple(h for _, h in stack))
    title = document.core_properties.title or (stack[0][1] if stack else "")
    return ParsedDocument(builder.text, builder.segments, "docx", MIME["docx"], title)
