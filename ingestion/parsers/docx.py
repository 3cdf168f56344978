"""DOCX, streamed: `word/document.xml` is read with lxml's iterparse straight from the ZIP member
and every element is dropped once its text is taken, so memory follows the extracted text (capped),
not the XML. python-docx loaded the whole tree (about 10x the XML: a 92 MB document.xml took a
worker to 9-15 GB) and only saw the body's direct children, so tables inside content controls
(`w:sdt`) were lost (docx_rich_tables_01.docx: 970 of ~12,100 characters).

Paragraphs and tables come in reading order; "Heading N"/"Title" styles (or an outline level)
give heading paths; a table is one segment whose rows are lines (`cell | cell`), and a nested
table is written inside its cell as `[row; row]`, where it stands.
"""

from __future__ import annotations

import io
import logging
import re
import zipfile

from lxml import etree

from ingestion.errors import PermanentError
from ingestion.parsers.base import ParsedDocument, TextBuilder
from ingestion.parsers.detect import MIME
from ingestion.parsers.tables import TableBlocks

log = logging.getLogger(__name__)
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_MC_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_HEADING = re.compile(r"^heading\s*(\d)$", re.I)
_STYLES_MAX = 20_000_000  # styles.xml is parsed whole; real ones are tens of KB
_SAFE = {"resolve_entities": False, "no_network": True, "load_dtd": False, "huge_tree": True}


def _heading_styles(archive: zipfile.ZipFile) -> dict[str, int]:
    """styleId -> heading level, from the style names (ids are localised: "berschrift1")."""
    try:
        info = archive.getinfo("word/styles.xml")
    except KeyError:
        return {}
    if info.file_size > _STYLES_MAX:
        return {}
    root = etree.fromstring(archive.read(info), etree.XMLParser(**_SAFE))
    levels = {}
    for style in root.iter(f"{W}style"):
        style_id = style.get(f"{W}styleId") or ""
        name_el = style.find(f"{W}name")
        name = (name_el.get(f"{W}val") if name_el is not None else "") or style_id
        match = _HEADING.match(name)
        if name.lower() == "title":
            levels[style_id] = 1
        elif match:
            levels[style_id] = int(match.group(1))
    return levels


class _Reader:
    """State of one streamed pass: the open paragraph, the open tables, the heading stack."""

    def __init__(self, heading_styles: dict[str, int], max_chars: int) -> None:
        self.styles, self.max_chars = heading_styles, max_chars
        self.builder = TextBuilder()
        self.tables = TableBlocks(self.builder)
        self.stack: list[tuple[int, str]] = []
        self.runs: list[str] = []
        self.level: int | None = None
        self.cells: list[list[list[str]]] = []  # per open table: its rows' cells
        self.cell_parts: list[list[str]] = []  # per open table: the open cell's paragraphs
        self.chars = 0
        self.fallback_depth = 0

    def count(self, n: int) -> None:
        self.chars += n
        if self.chars > self.max_chars:
            raise PermanentError(
                f"the document holds more than {self.max_chars:,} characters of text (the parsed-text "
                "limit, max_parsed_chars)",
                "text_too_large",
            )

    def path(self) -> tuple[str, ...]:
        return tuple(h for _, h in self.stack)

    def end_paragraph(self) -> None:
        text = "".join(self.runs).strip()
        self.runs, level = [], self.level
        self.level = None
        if self.cell_parts:
            if text:
                self.cell_parts[-1].append(text)
            return
        if level is not None and text:
            while self.stack and self.stack[-1][0] >= level:
                self.stack.pop()
            self.stack.append((level, text))
        self.tables.paragraph(text, self.path())

    def end_cell(self) -> None:
        parts = self.cell_parts[-1]
        self.cells[-1][-1].append(" ".join(p.replace("|", "/") for p in parts))
        parts.clear()

    def end_table(self) -> None:
        rows = [" | ".join(cells) for cells in self.cells.pop() if any(c.strip() for c in cells)]
        self.cell_parts.pop()
        if self.cell_parts:  # nested: written into the enclosing cell, where it stands
            if rows:
                self.cell_parts[-1].append("[" + "; ".join(rows) + "]")
        else:
            self.tables.table(rows, self.path())


def parse_docx(data: bytes, max_chars: int = 50_000_000) -> ParsedDocument:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        reader = _Reader(_heading_styles(archive), max_chars)
        with archive.open("word/document.xml") as xml:
            _stream(reader, xml)
        title = _core_title(archive)
    except PermanentError:
        raise
    except (zipfile.BadZipFile, KeyError, ValueError, etree.XMLSyntaxError, EOFError, OSError) as exc:
        log.warning("corrupt DOCX: %s: %s", type(exc).__name__, exc)
        raise PermanentError("corrupt DOCX", "corrupt_file") from None
    builder = reader.builder
    title = title or (reader.stack[0][1] if reader.stack else "")
    return ParsedDocument(builder.text, builder.segments, "docx", MIME["docx"], title)


# Only these reach Python: run properties (w:rPr and its many children), the bulk of Word's XML,
# are built by libxml2 and dropped with their paragraph, never visited one by one.
_TAGS = [f"{W}{t}" for t in ("t", "tab", "br", "cr", "pStyle", "outlineLvl", "p", "tc", "tr", "tbl")]


def _stream(reader: _Reader, xml) -> None:
    for event, el in etree.iterparse(xml, events=("start", "end"), tag=[*_TAGS, _MC_FALLBACK], **_SAFE):
        tag = el.tag
        if event == "start":
            if tag == _MC_FALLBACK:
                reader.fallback_depth += 1  # the same content again, for old readers
            elif tag == f"{W}tbl":
                reader.cells.append([])
                reader.cell_parts.append([])
            elif tag == f"{W}tr" and reader.cells:
                reader.cells[-1].append([])
            continue
        if tag == _MC_FALLBACK:
            reader.fallback_depth -= 1
        elif reader.fallback_depth:
            pass
        elif tag == f"{W}t":
            text = el.text or ""
            reader.count(len(text))
            reader.runs.append(text)
        elif tag == f"{W}tab":
            reader.runs.append("\t")
        elif tag in (f"{W}br", f"{W}cr"):
            reader.runs.append(" " if reader.cell_parts else "\n")
        elif tag == f"{W}pStyle":
            reader.level = reader.styles.get(el.get(f"{W}val") or "", reader.level)
        elif tag == f"{W}outlineLvl" and reader.level is None:
            value = el.get(f"{W}val") or ""
            reader.level = int(value) + 1 if value.isdigit() and int(value) < 9 else None
        elif tag == f"{W}p":
            reader.end_paragraph()
        elif tag == f"{W}tc" and reader.cell_parts:
            reader.end_cell()
        elif tag == f"{W}tbl" and reader.cells:
            reader.end_table()
        # NOTE: what is read is dropped at once (and the siblings before it), so the tree never
        # holds more than the path to the current element.
        el.clear(keep_tail=False)
        parent = el.getparent()
        if parent is not None:
            while el.getprevious() is not None:
                del parent[0]


def _core_title(archive: zipfile.ZipFile) -> str:
    try:
        info = archive.getinfo("docProps/core.xml")
    except KeyError:
        return ""
    if info.file_size > _STYLES_MAX:
        return ""
    root = etree.fromstring(archive.read(info), etree.XMLParser(**_SAFE))
    found = root.find("{http://purl.org/dc/elements/1.1/}title")
    return (found.text or "").strip() if found is not None else ""
