"""Parsers and content sniffing on generated files (and on the shared samples when present)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingestion.errors import PermanentError
from ingestion.parsers import parse
from ingestion.parsers.detect import detect_kind
from tests.ingestion.samples import BINARY, CORRUPT_PDF, HTML, JATS, MARKDOWN, make_docx, make_pdf

pytestmark = pytest.mark.unit

SHARED = Path(__file__).resolve().parents[3] / "shared" / "eval" / "docs"


def _segment_texts(doc):
    return [doc.text[s.start : s.end] for s in doc.segments]


def test_type_is_detected_from_content_not_extension():
    assert detect_kind(make_pdf([["hello"]]), "notes.txt") == "pdf"
    assert detect_kind(make_docx({"A": ["b"]}), "file.bin") == "docx"
    assert detect_kind(HTML.encode(), "page.txt") == "html"
    assert detect_kind(JATS.encode(), "article.html") == "jats"
    assert detect_kind(MARKDOWN.encode(), "readme") == "markdown"
    assert detect_kind(b'{"text": "a"}\n{"text": "b"}\n', "data.txt") == "jsonl"
    assert detect_kind(b'[{"text": "a"}]', None) == "json"
    assert detect_kind(b"just some words", "x.pdf") == "text"
    with pytest.raises(PermanentError, match="PNG image"):
        detect_kind(b"\x89PNG\r\n\x1a\n" + BINARY, "photo.pdf")


def test_pdf_pages_and_corrupt_pdf():
    doc = parse(make_pdf([["First page line."], ["Second page line."]]), "a.pdf")
    assert [(s.page, t) for s, t in zip(doc.segments, _segment_texts(doc), strict=True)] == [
        (1, "First page line."),
        (2, "Second page line."),
    ]
    with pytest.raises(PermanentError, match="corrupt PDF"):
        parse(CORRUPT_PDF, "broken.pdf")


def test_markdown_heading_paths_and_verbatim_spans():
    doc = parse(MARKDOWN.encode(), "guide.md")
    paths = [s.heading_path for s in doc.segments]
    assert paths == [
        ("Field guide",),
        ("Field guide", "Birds"),
        ("Field guide", "Birds", "Owls"),
        ("Field guide", "Trees"),
    ]
    assert doc.text == MARKDOWN
    assert _segment_texts(doc)[2].startswith("### Owls")


def test_html_keeps_main_content_only():
    doc = parse(HTML.encode(), "otters.html")
    assert "holts" in doc.text and "semiaquatic" in doc.text
    assert "Cookie settings" not in doc.text and "About us" not in doc.text
    assert ("River otters", "Habitat") in [s.heading_path for s in doc.segments]
    assert doc.title == "River otters"  # trafilatura prefers the article heading to <title>


def test_docx_headings_and_records():
    doc = parse(make_docx({"Intro": ["One.", "Two."], "Next": ["Three."]}), "m.docx")
    assert [(s.heading_path, t) for s, t in zip(doc.segments, _segment_texts(doc), strict=True)] == [
        (("Intro",), "Intro\n\nOne.\n\nTwo."),
        (("Next",), "Next\n\nThree."),
    ]
    records = parse(b'{"title": "A", "text": "alpha"}\n{"id": 2, "body": "beta"}\n', "r.jsonl")
    assert _segment_texts(records) == ["alpha", "beta"]
    assert [s.metadata for s in records.segments] == [{"record": 0}, {"record": 1}]
    assert records.segments[0].heading_path == ("A",)


def test_jats_sections_tables_and_figures_without_references():
    doc = parse(JATS.encode(), "otters.nxml")
    assert doc.kind == "jats" and doc.title == "Otters in cold rivers"
    by_path = {s.heading_path: doc.text[s.start : s.end] for s in doc.segments}
    assert list(by_path) == [("Abstract",), ("Methods", "Sites"), ("Results",), ("Acknowledgments",)]
    # Every block is its own paragraph: no heading glued to the next sentence, no bare heading chunk.
    assert by_path[("Methods", "Sites")].startswith("Methods\n\nSites\n\nWe sampled 12 rivers.")
    assert "dense fur." in by_path[("Abstract",)]  # the entity only the DTD defines is dropped
    assert "- Upland streams" in doc.text and "Tay | 31" in doc.text and "Fig 1 An otter diving." in doc.text
    assert "Keyword-dense title" not in doc.text
    with pytest.raises(PermanentError, match="no text"):
        parse(b'<!DOCTYPE article PUBLIC "-//NLM//DTD JATS v1.2//EN" "x.dtd"><article><front', "a.xml")


def test_permanent_errors_are_readable():
    with pytest.raises(PermanentError, match="empty file"):
        parse(b"  \n ", "e.txt")
    with pytest.raises(PermanentError, match="too large"):
        parse(b"x" * 2000, "big.txt", max_bytes=1000)
    with pytest.raises(PermanentError, match="unsupported file type"):
        parse(BINARY, "blob.bin")


@pytest.mark.skipif(not SHARED.exists(), reason="shared parsing samples not present")
@pytest.mark.parametrize(
    ("path", "kind", "needle"),
    [
        ("pdf/multi_page.pdf", "pdf", "Word Processor"),
        ("html/wiki_duck.html", "html", "Anatidae"),
        ("md/wiki.md", "markdown", "IBM"),
        ("docx/word_sample.docx", "docx", "swim"),
        ("jats/pntd.0008301.nxml", "jats", "The overall pre-TAS pass rate"),
    ],
)
def test_shared_samples(path, kind, needle):
    doc = parse((SHARED / path).read_bytes(), path)
    assert doc.kind == kind and needle in doc.text
    assert all(doc.text[s.start : s.end].strip() for s in doc.segments)
