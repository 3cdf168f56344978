"""PDF text with page numbers (pypdf; PyMuPDF is AGPL and never used). A page without a text layer
(a scan) is read by OCR from its embedded images (ingestion/parsers/ocr.py), up to `ocr_max_pages`
pages per document; the page's segment then says `ocr: true`.
"""

from __future__ import annotations

import io
import logging

from pypdf import PdfReader
from pypdf.errors import PdfReadError

from ingestion.errors import PermanentError
from ingestion.parsers.base import ParsedDocument, TextBuilder

# pypdf logs every recoverable oddity of real-world files as a warning; failures still raise.
logging.getLogger("pypdf").setLevel(logging.ERROR)
log = logging.getLogger(__name__)
MIN_TEXT_LAYER = 16  # fewer non-blank characters than this: the page is an image of text


def _ocr_page(page) -> str:
    from ingestion.parsers.ocr import ocr_image

    texts = []
    try:
        images = list(page.images)
    except Exception as exc:  # pypdf raises many types on image filters it cannot decode
        log.warning("page images unreadable: %s: %s", type(exc).__name__, exc)
        return ""
    for image in images:
        try:
            texts.append(ocr_image(image.image))
        except Exception as exc:
            log.warning("OCR of a page image failed: %s: %s", type(exc).__name__, exc)
    return "\n".join(t for t in texts if t)


def parse_pdf(data: bytes, ocr_max_pages: int = 200) -> ParsedDocument:
    ocr_done = 0
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise PermanentError("encrypted PDF: a password is required", "encrypted")
        builder = TextBuilder()
        for number, page in enumerate(reader.pages, start=1):
            text = page.extract_text() or ""
            if len("".join(text.split())) < MIN_TEXT_LAYER and ocr_done < ocr_max_pages:
                ocr_done += 1
                scanned = _ocr_page(page)
                if scanned.strip():
                    builder.add(scanned, page=number, ocr=True)
                    continue
            builder.add(text, page=number)
        title = str((reader.metadata or {}).get("/Title") or "")
        pages = len(reader.pages)
    except PermanentError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError) as exc:
        # NOTE: pypdf signals truncated or garbage files with a range of exception types.
        log.warning("corrupt PDF: %s: %s", type(exc).__name__, exc)
        raise PermanentError("corrupt PDF", "corrupt_file") from None
    return ParsedDocument(builder.text, builder.segments, "pdf", "application/pdf", title, pages)
