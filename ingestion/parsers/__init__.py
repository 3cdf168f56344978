"""Parsers: bytes in, `ParsedDocument` (text + provenance segments) out. `parse` picks the parser
from the content (see detect.py) and turns every unusable input into a `PermanentError`.
"""

from __future__ import annotations

from ingestion.errors import PermanentError
from ingestion.parsers.base import ParsedDocument, Segment, TextBuilder
from ingestion.parsers.detect import DEFAULT_MAX_UNPACKED, MIME, decode_text, detect_kind
from ingestion.parsers.textyield import yield_warnings

DEFAULT_MAX_CHARS = 50_000_000


def _plain_text(text: str) -> ParsedDocument:
    builder = TextBuilder()
    builder.add(text.replace("\r\n", "\n").replace("\r", "\n"))
    return ParsedDocument(builder.text, builder.segments, "text", MIME["text"])


def parse(
    data: bytes,
    filename: str | None = None,
    max_bytes: int | None = None,
    max_unpacked_bytes: int = DEFAULT_MAX_UNPACKED,
    max_chars: int = DEFAULT_MAX_CHARS,
    ocr_max_pages: int = 200,
) -> ParsedDocument:
    """`max_chars` caps the text an Office parser extracts (it fails past it, while parsing);
    `ocr_max_pages` caps the scanned PDF pages read by OCR. The result carries the text-yield
    check's warnings."""
    if max_bytes is not None and len(data) > max_bytes:
        raise PermanentError(
            f"file too large: {len(data) / 1e6:.1f} MB, over the {max_bytes / 1e6:.1f} MB limit",
            "file_too_large",
        )
    if not data.strip():
        raise PermanentError("empty file", "empty_file")
    kind = detect_kind(data, filename, max_unpacked_bytes)
    if kind == "pdf":
        from ingestion.parsers.pdf import parse_pdf

        doc = parse_pdf(data, ocr_max_pages)
    elif kind == "docx":
        from ingestion.parsers.docx import parse_docx

        doc = parse_docx(data, max_chars)
    elif kind == "pptx":
        from ingestion.parsers.pptx import parse_pptx

        doc = parse_pptx(data, max_chars)
    elif kind == "xlsx":
        from ingestion.parsers.xlsx import parse_xlsx

        doc = parse_xlsx(data, max_chars)
    elif kind == "jats":
        from ingestion.parsers.jats import parse_jats

        doc = parse_jats(data)
    elif kind == "html":
        from ingestion.parsers.html import parse_html

        doc = parse_html(decode_text(data))
    elif kind == "markdown":
        from ingestion.parsers.markdown import parse_markdown

        doc = parse_markdown(decode_text(data))
    elif kind in ("json", "jsonl"):
        from ingestion.parsers.records import parse_records

        doc = parse_records(decode_text(data), kind)
    else:
        doc = _plain_text(decode_text(data))
    if not doc.text.strip() or not doc.segments:
        raise PermanentError(f"no text could be extracted from this {kind} file", "no_text")
    doc.warnings = yield_warnings(doc, data)
    return doc


__all__ = ["ParsedDocument", "PermanentError", "Segment", "parse"]
