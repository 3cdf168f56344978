"""Documents parsed whole, through upload and the real worker: a scanned PDF read by OCR, PPTX and
XLSX files made here, and the rich-tables DOCX sample; no table chunk ends inside a row."""

from __future__ import annotations

import collections
import io
import re
from pathlib import Path

import pytest

from ingestion.parsers import parse
from tests.api.connectors.helpers import documents, search_sources
from tests.ingestion.helpers import create_collection, upload, wait_job

pytestmark = [pytest.mark.integration]
SHARED = Path(__file__).resolve().parents[4] / "shared" / "eval" / "docs"
SCANNED_LINES = [
    "The quarterly harvest of blueberries rose sharply.",
    "Lighthouse keepers recorded fog on nineteen days.",
]


def scanned_pdf() -> bytes:
    """A page that is only an image of text (no text layer), as a scanner makes it."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (1240, 400), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=32)
    for i, line in enumerate(SCANNED_LINES):
        draw.text((60, 80 + i * 80), line, fill="black", font=font)
    out = io.BytesIO()
    image.save(out, "PDF", resolution=150)
    return out.getvalue()


def make_pptx() -> bytes:
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Ferry timetable"
    table = slide.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(6), Inches(2)).table
    for r, row in enumerate([("Route", "Departure"), ("Island loop", "07:45"), ("Harbour shuttle", "09:10")]):
        for c, text in enumerate(row):
            table.cell(r, c).text = text
    slide.notes_slide.notes_text_frame.text = "Mention the winter schedule of the catamaran."
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def make_xlsx() -> bytes:
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = "Inventory"
    sheet.append(["Item", "Count", "Shelf"])
    for i in range(60):
        sheet.append([f"lantern model {i}", i * 3, f"aisle {i % 7}"])
    sheet.append(["periscope", 2, "aisle 9"])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def _rows_whole(client, document_id: str, rows: set[str]) -> int:
    """Table chunks checked: each is a run of whole table rows."""
    chunks = client.get(f"/v1/documents/{document_id}/chunks", params={"limit": 1000}).json()["items"]
    checked = 0
    for chunk in chunks:
        if chunk["metadata"].get("table"):
            assert all(line in rows for line in chunk["text"].split("\n")), chunk["text"][:300]
            checked += 1
    return checked


def test_scanned_pptx_xlsx_and_tables_indexed_whole(client, celery_worker):
    collection = create_collection(client, "whole-docs", chunking={"strategy": "recursive", "chunk_size": 64})
    files = {"scan.pdf": scanned_pdf(), "ferries.pptx": make_pptx(), "stock.xlsx": make_xlsx()}
    tables = SHARED / "docx" / "docx_rich_tables_01.docx"
    if tables.exists():
        files["rich.docx"] = tables.read_bytes()
    job = wait_job(client, upload(client, "whole-docs", files)["job_id"])
    assert job["documents_done"] == len(files), job
    docs = documents(client, "whole-docs")
    assert all(d["status"] == "indexed" for d in docs.values()), {k: d["status"] for k, d in docs.items()}
    cid = collection["id"]
    assert search_sources(client, cid, "lighthouse keepers fog")[0] == "scan.pdf"
    assert search_sources(client, cid, "harbour shuttle departure")[0] == "ferries.pptx"
    assert search_sources(client, cid, "catamaran winter")[0] == "ferries.pptx"  # speaker notes
    assert search_sources(client, cid, "periscope")[0] == "stock.xlsx"
    for name in ("stock.xlsx", "ferries.pptx", *(["rich.docx"] if "rich.docx" in files else [])):
        parsed = parse(files[name], name)
        rows = {
            line
            for s in parsed.segments
            if s.metadata.get("table")
            for line in parsed.text[s.start : s.end].split("\n")
        }
        assert _rows_whole(client, docs[name]["id"], rows) >= 1
    if "rich.docx" not in files:
        pytest.skip("the shared tables sample is absent: checked the generated files only")


@pytest.mark.skipif(not SHARED.exists(), reason="shared parsing samples not present")
def test_rich_tables_docx_keeps_its_reference_text():
    doc = parse((SHARED / "docx" / "docx_rich_tables_01.docx").read_bytes(), "rich.docx")
    reference = (SHARED / "docling_groundtruth_md" / "docx" / "docx_rich_tables_01.docx.md").read_text()

    def words(text: str) -> collections.Counter:
        return collections.Counter(re.findall(r"\w+", text.lower()))

    ref, got = words(reference), words(doc.text)
    kept = sum(min(n, got[w]) for w, n in ref.items()) / sum(ref.values())
    assert kept >= 0.95, kept
    assert not doc.warnings
