"""The file types the parsers read, as clients can check them before uploading: every kind of
detect.MIME with its file-name extensions. The bytes still decide (detect.py); this is the list a
client refuses other files by, so a kind a new parser adds to MIME appears here by itself."""

from __future__ import annotations

import mimetypes

from ingestion.parsers.detect import _HTML_EXT, _MD_EXT, MIME

# Plain text is read from any text file; these are the usual names of one beyond text/plain's own.
_TEXT_EXT = (
    ".txt",
    ".text",
    ".csv",
    ".tsv",
    ".log",
    ".rst",
    ".org",
    ".tex",
    ".yaml",
    ".yml",
    ".toml",
    ".ini",
    ".cfg",
    ".py",
    ".js",
    ".ts",
    ".sql",
    ".sh",
)
_EXTRA = {
    "markdown": _MD_EXT,
    "html": _HTML_EXT,
    "text": _TEXT_EXT,
    "jats": (".nxml", ".xml"),
    "jsonl": (".jsonl", ".ndjson"),
}


def formats() -> list[dict]:
    """[{kind, mime_type, extensions}] for every kind the parsers read."""
    out = []
    for kind, mime in MIME.items():
        found = mimetypes.guess_all_extensions(mime, strict=False) + list(_EXTRA.get(kind, ()))
        out.append({"kind": kind, "mime_type": mime, "extensions": sorted(set(found))})
    return out
