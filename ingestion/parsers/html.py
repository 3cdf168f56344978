"""HTML: trafilatura keeps the main content (no navigation, footers, ads) and renders it as
Markdown, so headings become the sections' paths exactly as for Markdown files.
"""

from __future__ import annotations

import trafilatura
from lxml import html as lxml_html

from ingestion.parsers.base import ParsedDocument
from ingestion.parsers.markdown import parse_markdown


def _body_text(source: str) -> str:
    """Fallback for pages too small for trafilatura's content heuristics."""
    try:
        tree = lxml_html.fromstring(source)
    except Exception:  # lxml raises several types on junk input
        return ""
    for bad in tree.xpath("//script|//style|//noscript"):
        bad.drop_tree()
    return "\n\n".join(p.strip() for p in tree.text_content().split("\n") if p.strip())


def parse_html(source: str) -> ParsedDocument:
    content = trafilatura.extract(
        source,
        output_format="markdown",
        include_tables=True,
        include_links=False,
        include_comments=False,
        favor_recall=True,
    )
    if not content or not content.strip():
        content = _body_text(source)
    meta = trafilatura.extract_metadata(source)
    doc = parse_markdown(content or "", kind="html", mime_type="text/html")
    if meta is not None and meta.title:
        doc.title = meta.title
    return doc
