"""XLSX via openpyxl in read-only mode (rows streamed, cached values, no formulas): each sheet's
blocks of non-empty rows, separated by empty rows, are tables under the sheet's name."""

from __future__ import annotations

import io
import logging
import zipfile

from openpyxl import load_workbook

from ingestion.errors import PermanentError
from ingestion.parsers.base import ParsedDocument, TextBuilder
from ingestion.parsers.detect import MIME
from ingestion.parsers.tables import TableBlocks

log = logging.getLogger(__name__)


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).replace("|", "/").replace("\n", " ").strip()


def parse_xlsx(data: bytes, max_chars: int = 50_000_000) -> ParsedDocument:
    try:
        book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as exc:
        log.warning("corrupt XLSX: %s: %s", type(exc).__name__, exc)
        raise PermanentError("corrupt XLSX", "corrupt_file") from None
    builder = TextBuilder()
    blocks = TableBlocks(builder)
    chars = 0
    try:
        for sheet in book.worksheets:
            rows: list[str] = []
            for values in sheet.iter_rows(values_only=True):
                cells = [_cell(v) for v in values]
                while cells and not cells[-1]:
                    cells.pop()
                if not cells:  # an empty row ends a table
                    blocks.table(rows, (sheet.title,))
                    rows = []
                    continue
                rows.append(" | ".join(cells))
                chars += len(rows[-1])
                if chars > max_chars:
                    raise PermanentError(
                        "the workbook holds more text than the parsed-text limit", "text_too_large"
                    )
            blocks.table(rows, (sheet.title,))
    finally:
        book.close()
    title = book.properties.title or "" if book.properties else ""
    return ParsedDocument(builder.text, builder.segments, "xlsx", MIME["xlsx"], title)
