"""PDF text with page numbers (pypdf; PyMuPDF is AGPL and never used). Scanned pages have no text
layer: OCR is out of scope, so an all-image PDF fails as empty.
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


def parse_pdf(data: bytes) -> ParsedDocument:
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise PermanentError("encrypted PDF: a password is required", "encrypted")
        builder = TextBuilder()
        for number, page in enumerate(reader.pages, start=1):
            builder.add(page.extract_text() or "", page=number)
        title = str((reader.metadata or {}).get("/Title") or "")
    except PermanentError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError) as exc:
        # NOTE: pypdf signals truncated or garbage files with a range of exception types.
        logging.getLogger(__name__).warning("corrupt PDF: %s: %s", type(exc).__name__, exc)
        raise PermanentError("corrupt PDF", "corrupt_file") from None
    return ParsedDocument(builder.text, builder.segments, "pdf", "application/pdf", title)
