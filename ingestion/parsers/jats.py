"""JATS XML (PubMed Central's `.nxml` articles): title, abstracts, sections with their heading
paths, paragraphs, lists, tables, figure captions and acknowledgments.

NOTE: read as HTML, a JATS article loses its title and headings and glues each heading to the next
paragraph ("...LF-endemic [43,44].ResultsThe overall pre-TAS pass rate..."), which breaks sentence
boundaries for chunking and for quote mode. Here every block is its own paragraph and every
section title a heading, as in the DOCX parser.
"""

from __future__ import annotations

from lxml import etree

from ingestion.errors import PermanentError
from ingestion.parsers.base import ParsedDocument, TextBuilder
from ingestion.parsers.detect import MIME

# No DTD, no external entities, no network: an article is data, not instructions to fetch more.
# The second parser recovers what it can of a truncated or malformed article.
_STRICT, _RECOVER = (
    etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, recover=recover)
    for recover in (False, True)
)
# NOTE: the reference list is left out. Its entries are short, keyword-dense titles of other work
# that outrank the article's own sentences for topical questions (on the long_docs dev set a chunk
# of references was the first hit for "How many scenarios of total mixed ration intake were
# evaluated?"), and they state nothing the article found.
_SKIP = {"label", "title", "caption", "object-id", "graphic", "alternatives", "ref-list"}


def _text(element) -> str:
    return " ".join("".join(element.itertext()).split())


def _table(wrap) -> str:
    lines = [_text(part) for part in wrap.iterchildren("label", "caption")]
    for row in wrap.iter("tr"):
        lines.append(" | ".join(_text(cell) for cell in row.iterchildren("td", "th")))
    lines += [_text(foot) for foot in wrap.iter("table-wrap-foot")]
    return "\n".join(line for line in lines if line)


class _Walker:
    """Blocks in document order. A section's title opens its first block, in the same segment, so
    that no chunk holds a bare heading ("Methods" directly followed by "Data sources")."""

    def __init__(self) -> None:
        self.builder = TextBuilder()
        self.pending: list[str] = []  # titles waiting for their section's first block

    def add(self, text: str, path: tuple[str, ...]) -> None:
        if text.strip():
            self.builder.add("\n\n".join([*self.pending, text]), heading_path=path)
            self.pending.clear()

    def section(self, element, path: tuple[str, ...], heading: str | None = None) -> None:
        title = heading or next((_text(t) for t in element.iterchildren("title")), "")
        if title:
            path = (*path, title)
            self.pending.append(title)
        for child in element:
            self.block(child, path)

    def block(self, element, path: tuple[str, ...]) -> None:
        tag = element.tag if isinstance(element.tag, str) else ""
        if tag in ("sec", "app", "boxed-text", "ack"):
            untitled = tag == "ack" and element.find("title") is None
            self.section(element, path, "Acknowledgments" if untitled else None)
        elif tag == "list":
            for item in element.iterchildren("list-item"):
                self.add(f"- {_text(item)}", path)
        elif tag == "table-wrap":
            self.add(_table(element), path)
        elif tag == "fig":
            self.add(" ".join(_text(part) for part in element.iterchildren("label", "caption")), path)
        elif tag in ("p", "disp-quote", "def-list", "statement", "fn"):
            self.add(_text(element), path)
        elif tag and tag not in _SKIP:
            for child in element:  # wrappers: fn-group, app-group, sec-meta, floats-group...
                self.block(child, path)


def parse_jats(data: bytes) -> ParsedDocument:
    try:
        root = etree.fromstring(data, parser=_STRICT)
    except etree.XMLSyntaxError as exc:
        root = etree.fromstring(data, parser=_RECOVER)
        if root is None:
            raise PermanentError(f"malformed JATS XML: {exc}", "corrupt_file") from None
    etree.strip_elements(root, etree.Entity, with_tail=False)  # named in the DTD only: unknown here
    walker = _Walker()
    meta = root.find("front/article-meta")
    meta = meta if meta is not None else etree.Element("article-meta")
    title = next((_text(t) for t in meta.iterfind("title-group/article-title")), "")
    if title:
        walker.pending.append(title)
    for abstract in meta.iterchildren("abstract", "trans-abstract"):
        kind = abstract.get("abstract-type")
        heading = "Author summary" if kind == "summary" else (kind or "abstract").capitalize()
        walker.section(abstract, (), None if abstract.find("title") is not None else heading)
    for part in ("body", "back"):
        for element in root.iterchildren(part):
            for child in element:
                walker.block(child, ())
    builder = walker.builder
    return ParsedDocument(builder.text, builder.segments, "jats", MIME["jats"], title)
