"""Content sniffing: the bytes decide the type; the file name only breaks text-format ties."""

from __future__ import annotations

import io
import json
import re
import zipfile

from ingestion.errors import PermanentError

_BINARY_MAGIC = {
    b"\x89PNG": "PNG image",
    b"\xff\xd8\xff": "JPEG image",
    b"GIF8": "GIF image",
    b"\x7fELF": "ELF executable",
    b"MZ": "Windows executable",
    b"\x1f\x8b": "gzip archive",
    b"Rar!": "RAR archive",
    b"7z\xbc\xaf": "7-Zip archive",
    b"\xd0\xcf\x11\xe0": "legacy MS Office (OLE) file",
}
# The main part that makes an Office ZIP what it is; anything else zipped is refused.
_OFFICE_PARTS = {"word/document.xml": "docx", "ppt/presentation.xml": "pptx", "xl/workbook.xml": "xlsx"}
_ZIP_KINDS = {"META-INF/": "Java/EPUB archive"}
_HTML_START = re.compile(
    rb"^\s*(<\?xml[^>]*>\s*)?(<!--.*?-->\s*)*<(!doctype\s+html|html|head|body)\b", re.I | re.S
)
# A JATS (or older NLM) article, PubMed Central's .nxml: its doctype, or an <article> root with <front>.
_JATS_START = re.compile(
    rb"^\s*(<\?xml[^>]*>\s*)?(<!--.*?-->\s*)*"
    rb"(<!doctype\s+article\b[^>]*\b(JATS|NLM)\b|<article\b[^>]*>\s*(<\?[^>]*>\s*)*<front\b)",
    re.I | re.S,
)
_HTML_TAGS = re.compile(r"<(p|div|h[1-6]|ul|ol|li|table|article|section|span|a)\b[^>]*>", re.I)
_MD_SIGNS = re.compile(r"^(#{1,6}\s+\S|```|~~~|\s*[-*+]\s+\[[ x]\]|\|.+\|\s*$|.+\n(=+|-+)\s*$)", re.M)
_MD_EXT = (".md", ".markdown", ".mdx", ".mkd")
_HTML_EXT = (".html", ".htm", ".xhtml")

MIME = {
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "html": "text/html",
    "jats": "application/jats+xml",
    "markdown": "text/markdown",
    "text": "text/plain",
    "json": "application/json",
    "jsonl": "application/jsonl",
}


# The one list of what can be ingested (kind -> usual file extensions); the type itself is always
# sniffed from the bytes, so the extensions are what an upload form offers, not what is trusted.
EXTENSIONS = {
    "pdf": (".pdf",),
    "docx": (".docx",),
    "pptx": (".pptx",),
    "xlsx": (".xlsx",),
    "html": _HTML_EXT,
    "jats": (".nxml", ".xml"),
    "markdown": _MD_EXT,
    "text": (".txt",),
    "json": (".json",),
    "jsonl": (".jsonl",),
}


def decode_text(data: bytes) -> str:
    """UTF-8 (with or without BOM) or UTF-16 with a BOM; otherwise Windows-1252, the usual legacy."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


def _looks_binary(data: bytes) -> bool:
    head = data[:8192]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return False
    if b"\x00" in head:
        return True
    control = sum(1 for b in head if b < 32 and b not in (9, 10, 12, 13))
    return control > len(head) * 0.05


# Unpacked size of an Office file's parts, in all; the XML parsers hold all of it (and ~10x that in
# trees) in memory, so this bounds a worker's memory per document.
DEFAULT_MAX_UNPACKED = 100_000_000
# A part that unpacks to more than this many times its packed size is a decompression bomb (Word's
# XML packs ~5-15x; the 755 KB DOCX of issue 12 unpacked 265x, to 200 MB).
MAX_RATIO = 100
_RATIO_FLOOR = 1_000_000  # small parts may pack better (runs of spaces) and cost nothing


def _check_expansion(infos: list[zipfile.ZipInfo], max_unpacked: int) -> None:
    """Refuse ZIP bombs from the central directory, before anything is inflated.

    NOTE: sizes there are declared, not measured; zipfile stops inflating a member at its declared
    size and fails its CRC check, so a member cannot unpack to more than it declares.
    """
    total = sum(i.file_size for i in infos)
    if total > max_unpacked:
        raise PermanentError(
            f"the file unpacks to {total / 1e6:.0f} MB, over the {max_unpacked / 1e6:.0f} MB limit",
            "unpacked_too_large",
        )
    for info in infos:
        if info.file_size > _RATIO_FLOOR and info.file_size > MAX_RATIO * max(1, info.compress_size):
            raise PermanentError(
                f"part {info.filename!r} expands {info.file_size // max(1, info.compress_size)}x when "
                f"unpacked (limit {MAX_RATIO}x): a decompression bomb?",
                "unpacked_too_large",
            )


def _zip_kind(data: bytes, max_unpacked: int) -> str:
    try:
        infos = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except zipfile.BadZipFile:
        raise PermanentError("corrupt ZIP/Office file", "corrupt_file") from None
    names = {i.filename for i in infos}
    for part, kind in _OFFICE_PARTS.items():
        if part in names:
            _check_expansion(infos, max_unpacked)
            return kind
    for prefix, what in _ZIP_KINDS.items():
        if any(n.startswith(prefix) for n in names):
            raise PermanentError(f"unsupported file type: {what}", "unsupported_type")
    raise PermanentError("unsupported file type: ZIP archive", "unsupported_type")


def _json_kind(text: str) -> str | None:
    stripped = text.strip()
    if stripped[:1] in "[{":
        try:
            json.loads(stripped)
            return "json"
        except ValueError:
            pass
    lines = [line for line in stripped.splitlines() if line.strip()]
    if lines and lines[0].lstrip().startswith("{"):
        try:
            for line in lines:
                json.loads(line)
        except ValueError:
            return None
        return "jsonl"
    return None


def detect_kind(data: bytes, filename: str | None = None, max_unpacked: int = DEFAULT_MAX_UNPACKED) -> str:
    """One of MIME's keys, or PermanentError naming what the bytes are."""
    name = (filename or "").lower()
    if b"%PDF-" in data[:1024]:
        return "pdf"
    if data.startswith(b"PK\x03\x04"):
        return _zip_kind(data, max_unpacked)
    for magic, what in _BINARY_MAGIC.items():
        if data.startswith(magic):
            raise PermanentError(f"unsupported file type: {what}", "unsupported_type")
    if _looks_binary(data):
        raise PermanentError(
            "unsupported file type: binary content that is not PDF or an Office file", "unsupported_type"
        )
    if _JATS_START.match(data[:4096]):
        return "jats"
    if _HTML_START.match(data[:4096]):
        return "html"
    text = decode_text(data[:65536])
    if not text.strip():
        return "text"  # the parser reports it empty
    kind = _json_kind(decode_text(data)) if text.lstrip()[:1] in "[{" else None
    if kind:
        return kind
    if name.endswith(_HTML_EXT) and _HTML_TAGS.search(text):
        return "html"
    # NOTE: Markdown may embed HTML tables; its own signs win over a tag count.
    if name.endswith(_MD_EXT) or _MD_SIGNS.search(text):
        return "markdown"
    return "html" if len(_HTML_TAGS.findall(text)) >= 3 else "text"
