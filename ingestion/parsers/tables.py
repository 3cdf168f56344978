"""Tables as whole blocks: a table is a segment of its own (rows are lines, cells joined by ` | `),
tagged in its metadata with a number, its caption and its header row, so that the chunker packs
whole rows and repeats the caption and header in what each chunk embeds (ingestion/chunking)."""

from __future__ import annotations

from ingestion.parsers.base import TextBuilder

CAPTION_MAX = 200  # a longer paragraph before a table is body text, not its caption


def table_metadata(number: int, rows: list[str], caption: str = "") -> dict:
    return {"table": number, "table_caption": caption, "table_header": rows[0][:500] if rows else ""}


class TableBlocks:
    """Feeds paragraphs and tables to a TextBuilder; remembers the last short paragraph as the
    caption of a table that follows it."""

    def __init__(self, builder: TextBuilder) -> None:
        self.builder, self.count, self.last_paragraph = builder, 0, ""

    def paragraph(self, text: str, heading_path: tuple[str, ...], page: int | None = None) -> None:
        text = text.strip()
        if text:
            self.builder.add(text, page=page, heading_path=heading_path)
            self.last_paragraph = text

    def table(self, rows: list[str], heading_path: tuple[str, ...], page: int | None = None) -> None:
        rows = [" ".join(r.split()) for r in rows if r.strip()]
        if not rows:
            return
        self.count += 1
        caption = self.last_paragraph if len(self.last_paragraph) <= CAPTION_MAX else ""
        self.builder.add(
            "\n".join(rows), page=page, heading_path=heading_path, **table_metadata(self.count, rows, caption)
        )
        self.last_paragraph = ""
