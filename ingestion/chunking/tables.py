"""Tables are chunked by whole rows: rows (lines of a table segment) are packed up to the budget
and a row is never cut, even one longer than the budget (it is then a chunk of its own, embedded
truncated but stored and matched lexically whole). Each chunk embeds the table's caption (or
section heading) and, past the first rows, its header row, so a chunk of row 40 still says which
table and columns it belongs to."""

from __future__ import annotations

from ingestion.chunking.words import LINE, PARAGRAPH, WordIndex
from ingestion.parsers.base import Segment


def table_context(segment: Segment) -> tuple[str, str]:
    """(caption line, header line) to repeat in the embedded text of the table's chunks."""
    heading = segment.heading_path[-1] if segment.heading_path else ""
    caption = segment.metadata.get("table_caption") or heading
    return caption.strip(), str(segment.metadata.get("table_header") or "").strip()


def row_spans(index: WordIndex, size: int) -> list[tuple[int, int]]:
    """Word ranges of whole rows packed to `size` tokens."""
    levels = index.boundary_levels()
    rows, start = [], 0
    for k in range(1, len(index)):
        if levels[k] in (LINE, PARAGRAPH):
            rows.append((start, k))
            start = k
    if len(index):
        rows.append((start, len(index)))
    out: list[tuple[int, int]] = []
    for a, b in rows:
        if out and index.tokens(out[-1][0], b) <= size:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out
