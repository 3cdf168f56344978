"""Parsers: bytes in, `ParsedDocument` (text + provenance segments) out. `parse` picks the parser
from the content (see detect.py) and turns every unusable input into a `PermanentError`.
"""

from __future__ import annotations

from ingestion.errors import PermanentError
from ingestion.parsers.base import ParsedDocument, Segment, TextBuilder
from ingestion.parsers.detect import DEFAULT_MAX_UNPACKED, MIME, decode_text, detect_kind


def _plain_text(text: str) -> ParsedDocument:
    builder = TextBuilder()
    builder.add(text.replace("\r\n", "\n").replace("\r", "\n"))
    return ParsedDocument(builder.text, builder.segments, "text", MIME["text"])


def parse(
    data: bytes,
    filename: str | None = None,
    max_bytes: int | None = None,
    max_unpacked_bytes: int = DEFAULT_MAX_UNPACKED,
) -> ParsedDocument:
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

        doc = parse_pdf(data)
    elif kind == "docx":
        from ingestion.parsers.docx import parse_docx

        doc = parse_docx(data)
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
    return doc


__all__ = ["ParsedDocument", "PermanentError", "Segment", "parse"]
