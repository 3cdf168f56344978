"""The text-yield check: a document that gives far less text than its size suggests was probably
parsed badly (a scan OCR could not read, content the parser does not see). It is still indexed,
as `indexed_with_warnings`, with the reason in its metadata, instead of passing as a clean
`indexed` with a fraction of its text.

Ratios are of extracted characters to the bytes of the parts that hold the text (Office XML, not
its images): Word's XML holds ~5-15% of its size as text; the rich-tables sample that python-docx
read as 970 characters of a 163 KB document.xml gave 0.6%.
"""

from __future__ import annotations

import io
import re
import zipfile

from ingestion.parsers.base import ParsedDocument

_TEXT_PARTS = {
    "docx": re.compile(r"^word/(document|footnotes|endnotes)\.xml$"),
    "pptx": re.compile(r"^ppt/(slides|notesSlides)/[^/]+\.xml$"),
    "xlsx": re.compile(r"^xl/(sharedStrings\.xml|worksheets/[^/]+\.xml)$"),
}
MIN_RATIO = {"office": 0.01, "html": 0.002}
MIN_BYTES = 50_000  # small files vary too much to judge


def _chars(doc: ParsedDocument) -> int:
    return len("".join(doc.text.split()))


def yield_warnings(doc: ParsedDocument, data: bytes) -> list[str]:
    warnings = []
    chars = _chars(doc)
    if doc.kind == "pdf" and doc.pages:
        with_text = len({s.page for s in doc.segments})
        if with_text < doc.pages:
            warnings.append(f"low_text_yield: {doc.pages - with_text} of {doc.pages} pages yielded no text")
    elif doc.kind in _TEXT_PARTS:
        pattern = _TEXT_PARTS[doc.kind]
        infos = zipfile.ZipFile(io.BytesIO(data)).infolist()
        xml = sum(i.file_size for i in infos if pattern.match(i.filename))
        if xml > MIN_BYTES and chars < MIN_RATIO["office"] * xml:
            warnings.append(
                f"low_text_yield: {chars:,} characters from {xml / 1e3:,.0f} KB of document XML "
                f"(under {MIN_RATIO['office']:.0%})"
            )
    elif doc.kind == "html" and len(data) > MIN_BYTES and chars < MIN_RATIO["html"] * len(data):
        warnings.append(f"low_text_yield: {chars:,} characters from a {len(data) / 1e3:,.0f} KB page")
    return warnings
