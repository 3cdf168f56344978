"""JSON and JSONL records: one segment per record, so no chunk mixes two records."""

from __future__ import annotations

import json

from ingestion.parsers.base import ParsedDocument, TextBuilder
from ingestion.parsers.detect import MIME

TEXT_FIELDS = ("text", "content", "body", "page_content", "description")
TITLE_FIELDS = ("title", "name", "heading")


def _render(record: object) -> tuple[str, str]:
    """(text, title) of one record: its text field if it has one, else `key: value` lines."""
    if not isinstance(record, dict):
        return (record if isinstance(record, str) else json.dumps(record, ensure_ascii=False)), ""
    title = next((str(record[k]) for k in TITLE_FIELDS if isinstance(record.get(k), str)), "")
    for key in TEXT_FIELDS:
        if isinstance(record.get(key), str):
            return record[key], title
    lines = [
        f"{k}: {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}" for k, v in record.items()
    ]
    return "\n".join(lines), title


def parse_records(text: str, kind: str) -> ParsedDocument:
    if kind == "jsonl":
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
    else:
        loaded = json.loads(text)
        records = loaded if isinstance(loaded, list) else [loaded]
    builder = TextBuilder()
    for index, record in enumerate(records):
        body, title = _render(record)
        builder.add(body, heading_path=(title,) if title else (), record=index)
    return ParsedDocument(builder.text, builder.segments, kind, MIME[kind])
