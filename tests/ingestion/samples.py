"""Fixture files built in the tests: a real PDF (hand-written PDF 1.4 bytes), DOCX (python-docx),
HTML with boilerplate, Markdown with headings, a JATS article, text, a corrupt PDF, an empty file,
a binary."""

from __future__ import annotations

import io


def _pdf_escape(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(pages: list[list[str]]) -> bytes:
    """A PDF with one page per entry, each line drawn in Helvetica (extractable text)."""
    objects: list[bytes] = []
    kids = []
    font_id = 3
    for page_lines in pages:
        ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"]
        ops += [f"({_pdf_escape(line)}) Tj T*" for line in page_lines]
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1")
        content_id = 4 + len(objects)
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        page_id = 4 + len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (content_id, font_id)
        )
        kids.append(page_id)
    head = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % k for k in kids), len(kids)),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(head + objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(offsets) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(offsets) + 1, xref))
    return out.getvalue()


def make_docx(sections: dict[str, list[str]]) -> bytes:
    import docx

    document = docx.Document()
    for heading, paragraphs in sections.items():
        document.add_heading(heading, level=1)
        for paragraph in paragraphs:
            document.add_paragraph(paragraph)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


HTML = """<!DOCTYPE html><html><head><title>Otters of the river</title></head><body>
<nav><ul><li><a href="/">Home</a></li><li><a href="/about">About us</a></li></ul></nav>
<article><h1>River otters</h1>
<p>River otters are semiaquatic mammals that live along rivers, lakes and wetlands. They hunt fish,
crayfish and frogs, and they can hold their breath for several minutes while diving for food.</p>
<h2>Habitat</h2>
<p>Otters need clean water with plenty of prey. Their dens, called holts, are dug into river banks
among tree roots, and a single otter may use a dozen holts along its territory.</p></article>
<footer><p>Copyright 2024 Example Corp. All rights reserved. Cookie settings. Privacy policy.</p></footer>
</body></html>"""

MARKDOWN = """# Field guide

Short introduction to the guide and its purpose for hikers.

## Birds

Herons stand still in shallow water and strike at fish with their long beaks.

### Owls

Owls hunt at night; their feathers are shaped to make their flight almost silent.

## Trees

Oaks grow slowly and can live for centuries, hosting hundreds of insect species.
"""

TEXT = "Plain text notes about compost.\n\nMix green and brown material, keep it moist, and turn it weekly.\n"

CORRUPT_PDF = b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\ngarbage \x00\x01\x02 truncated"

BINARY = bytes(range(256)) * 8


def mixed_folder() -> dict[str, bytes]:
    return {
        "report.pdf": make_pdf(
            [
                ["Quarterly report, page one.", "Revenue grew in every region."],
                ["Page two lists the risks.", "Supply costs rose."],
            ]
        ),
        "otters.html": HTML.encode(),
        "guide.md": MARKDOWN.encode(),
        "memo.docx": make_docx(
            {
                "Summary": ["The memo summarises the meeting."],
                "Decisions": ["We adopt the new schedule in May."],
            }
        ),
        "notes.txt": TEXT.encode(),
        "broken.pdf": CORRUPT_PDF,
        "empty.txt": b"",
        "blob.bin": BINARY,
    }


def zip_bomb_docx(unpacked: int = 200_000_000) -> bytes:
    """A DOCX whose word/document.xml inflates to `unpacked` bytes (written in pieces, never whole)."""
    import zipfile

    buffer = io.BytesIO()
    piece = b"<w:p><w:r><w:t>a</w:t></w:r></w:p>" * 30_000
    template = zipfile.ZipFile(io.BytesIO(make_docx({"A": ["b"]})))
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for info in template.infolist():
            if info.filename != "word/document.xml":
                archive.writestr(info.filename, template.read(info.filename))
        with archive.open("word/document.xml", "w", force_zip64=True) as xml:
            written = 0
            while written < unpacked:
                xml.write(piece)
                written += len(piece)
    return buffer.getvalue()


# A PubMed Central article, cut down: its doctype, nested sections, a list, a table, a figure, and a
# reference list; `&ext;` names an entity only the (unread) DTD could define.
JATS = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE article PUBLIC "-//NLM//DTD JATS (Z39.96) Journal Archiving and Interchange DTD v1.2//EN"
 "JATS-archivearticle1.dtd">
<article xmlns:xlink="http://www.w3.org/1999/xlink" article-type="research-article"><front>
<article-meta><title-group><article-title>Otters in cold rivers</article-title></title-group>
<abstract><p>Otters keep warm with dense fur&ext;.</p></abstract></article-meta></front>
<body><sec><title>Methods</title><sec><title>Sites</title><p>We sampled 12 rivers.<xref>[1]</xref></p>
<list><list-item><p>Upland streams</p></list-item></list></sec></sec>
<sec><title>Results</title><p>Fur density rose with altitude.</p>
<table-wrap><label>Table 1</label><caption><p>Counts</p></caption>
<table><tr><th>River</th><th>Otters</th></tr><tr><td>Tay</td><td>31</td></tr></table></table-wrap>
<fig><label>Fig 1</label><caption><p>An otter diving.</p></caption></fig></sec></body>
<back><ack><p>We thank the wardens.</p></ack><ref-list><title>References</title>
<ref><mixed-citation>Smith J. Keyword-dense title of other work. 2001.</mixed-citation></ref>
</ref-list></back>
</article>
"""
