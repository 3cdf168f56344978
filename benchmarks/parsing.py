"""Parsing cost of whole documents: `python -m benchmarks.parsing [--docx-mb 92] [--ocr-pages 3]`.

- DOCX memory: a generated DOCX whose word/document.xml unpacks to `--docx-mb` MB (the shape of
  issue 28's file: many paragraphs and table rows) is parsed in a fresh subprocess; its peak RSS
  above the interpreter's idle RSS is reported, once under the default text cap and once with a
  cap below the file's text (which must fail as text_too_large, early).
- OCR: scanned pages (text rendered into an image, saved as a PDF page without a text layer) are
  parsed; pages/s and character accuracy (1 - edit distance / reference length) are reported.
Writes benchmarks/results/parsing.json and prints a table.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

RESULTS = Path(__file__).parent / "results" / "parsing.json"
ROOT = Path(__file__).resolve().parents[1]
LINES = [
    "The quarterly harvest of blueberries rose sharply in the northern valleys.",
    "Lighthouse keepers recorded fog on nineteen days of the winter season.",
    "Invoice number 4471 was paid in March by the harbour authority.",
    "Ferries to the outer islands leave at seven forty five each morning.",
]

_CHILD = """
import resource, sys, time
from ingestion.errors import PermanentError
from ingestion.parsers.docx import parse_docx
idle = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
data = open(sys.argv[1], "rb").read()
loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
try:
    doc = parse_docx(data, int(sys.argv[2]))
    outcome = f"ok {len(doc.text)} chars"
except PermanentError as exc:
    outcome = exc.reason
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"{(peak - idle) / 1024:.1f} {(peak - loaded) / 1024:.1f} {time.perf_counter() - t0:.2f} {outcome}")
"""


def make_big_docx(path: Path, unpacked_mb: float) -> tuple[int, int]:
    """A DOCX with paragraphs and table rows in document.xml; returns (xml bytes, text chars)."""
    from tests.ingestion.samples import make_docx

    template = zipfile.ZipFile(io.BytesIO(make_docx({"A": ["b"]})))
    head = template.read("word/document.xml").split(b"<w:body>")[0] + b"<w:body>"
    para = (
        b'<w:p><w:pPr><w:pStyle w:val="Normal"/></w:pPr><w:r><w:rPr><w:b/></w:rPr><w:t>%s</w:t></w:r></w:p>'
    )
    cell = b"<w:tc><w:p><w:r><w:t>%s</w:t></w:r></w:p></w:tc>"
    written, chars, i = 0, 0, 0
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for info in template.infolist():
            if info.filename != "word/document.xml":
                archive.writestr(info.filename, template.read(info.filename))
        with archive.open("word/document.xml", "w", force_zip64=True) as xml:
            xml.write(head)
            while written < unpacked_mb * 1e6:
                text = f"Paragraph {i} of the long report talks about item {i * 7 % 1000}.".encode()
                row = (
                    b"<w:tbl><w:tr>"
                    + b"".join(cell % f"cell {i}-{k}".encode() for k in range(4))
                    + b"</w:tr></w:tbl>"
                )
                piece = para % text + row
                xml.write(piece)
                written += len(piece)
                chars += len(text) + 4 * len(f"cell {i}-0")
                i += 1
            xml.write(b"</w:body></w:document>")
    return written, chars


def docx_memory(unpacked_mb: float) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.docx"
        xml_bytes, chars = make_big_docx(path, unpacked_mb)
        for cap in (50_000_000, chars // 2):
            out = subprocess.run(
                [sys.executable, "-c", _CHILD, str(path), str(cap)],
                capture_output=True,
                text=True,
                cwd=ROOT,
                env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
            )
            above_idle, above_loaded, seconds, *outcome = out.stdout.split()
            rows.append(
                {
                    "file_mb": round(path.stat().st_size / 1e6, 1),
                    "document_xml_mb": round(xml_bytes / 1e6, 1),
                    "text_chars": chars,
                    "cap_chars": cap,
                    "peak_rss_above_idle_mb": float(above_idle),
                    "peak_rss_above_loaded_mb": float(above_loaded),
                    "seconds": float(seconds),
                    "outcome": " ".join(outcome),
                }
            )
    return rows


def _edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def ocr(pages: int) -> dict:
    from PIL import Image, ImageDraw, ImageFont

    from ingestion.parsers import parse

    images = []
    for p in range(pages):
        image = Image.new("RGB", (1240, 1754), "white")  # A4 at 150 dpi
        draw = ImageDraw.Draw(image)
        font = ImageFont.load_default(size=28)
        for i, line in enumerate(LINES * 6):
            draw.text((90, 120 + i * 60), f"{p + 1}.{i} {line}", fill="black", font=font)
        images.append(image)
    out = io.BytesIO()
    images[0].save(out, "PDF", resolution=150, save_all=True, append_images=images[1:])
    t0 = time.perf_counter()
    doc = parse(out.getvalue(), "scan.pdf")
    seconds = time.perf_counter() - t0
    reference = "\n".join(f"{p + 1}.{i} {line}" for p in range(pages) for i, line in enumerate(LINES * 6))
    got = "\n".join(doc.text[s.start : s.end] for s in doc.segments)
    norm = lambda s: " ".join(s.split())  # noqa: E731
    accuracy = 1 - _edit_distance(norm(got), norm(reference)) / len(norm(reference))
    return {
        "pages": pages,
        "seconds": round(seconds, 2),
        "pages_per_s": round(pages / seconds, 3),
        "char_accuracy": round(accuracy, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docx-mb", type=float, default=92.0)
    parser.add_argument("--ocr-pages", type=int, default=1)
    args = parser.parse_args()
    result = {"docx": docx_memory(args.docx_mb), "ocr": ocr(args.ocr_pages)}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    table = Table("measure", "value")
    for row in result["docx"]:
        table.add_row(
            f"DOCX {row['document_xml_mb']} MB XML, cap {row['cap_chars']:,}",
            f"peak RSS +{row['peak_rss_above_idle_mb']} MB over idle, {row['seconds']} s, {row['outcome']}",
        )
    o = result["ocr"]
    table.add_row(
        f"OCR {o['pages']} pages", f"{o['pages_per_s']} pages/s, character accuracy {o['char_accuracy']:.2%}"
    )
    Console().print(table)


if __name__ == "__main__":
    main()
