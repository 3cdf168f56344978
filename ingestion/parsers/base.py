"""What a parser returns: one plain text plus the provenance of each of its spans."""

from __future__ import annotations

from dataclasses import dataclass, field

BLOCK_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Segment:
    """A span of the parsed text with one provenance; chunks never straddle two segments."""

    start: int
    end: int
    page: int | None = None
    heading_path: tuple[str, ...] = ()
    metadata: dict = field(default_factory=dict)


@dataclass
class ParsedDocument:
    text: str
    segments: list[Segment]
    kind: str  # pdf, docx, pptx, xlsx, html, jats, markdown, text, json, jsonl
    mime_type: str
    title: str = ""
    pages: int | None = None  # PDF: pages in the file (some may have yielded no text)
    warnings: list[str] = field(default_factory=list)  # the text-yield check's (parsers/textyield.py)


class TextBuilder:
    """Concatenates blocks with blank lines and records a segment per run of equal provenance."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._length = 0
        self.segments: list[Segment] = []

    def add(self, text: str, page: int | None = None, heading_path: tuple[str, ...] = (), **metadata) -> None:
        text = text.strip()
        if not text:
            return
        if self._parts:
            self._parts.append(BLOCK_SEPARATOR)
            self._length += len(BLOCK_SEPARATOR)
        start = self._length
        self._parts.append(text)
        self._length += len(text)
        last = self.segments[-1] if self.segments else None
        if last and (last.page, last.heading_path, last.metadata) == (page, heading_path, metadata):
            self.segments[-1] = Segment(last.start, self._length, page, heading_path, metadata)
        else:
            self.segments.append(Segment(start, self._length, page, heading_path, metadata))

    @property
    def text(self) -> str:
        return "".join(self._parts)
