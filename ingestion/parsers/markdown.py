"""Markdown: the source text is kept verbatim (spans point into the file); headings give each
section its path, e.g. ("Install", "Linux").
"""

from __future__ import annotations

from markdown_it import MarkdownIt

from ingestion.parsers.base import ParsedDocument, Segment

_MD = MarkdownIt("commonmark").enable("table")


def _strip_span(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def parse_markdown(text: str, kind: str = "markdown", mime_type: str = "text/markdown") -> ParsedDocument:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    line_starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            line_starts.append(i + 1)
    tokens = _MD.parse(text)
    # (offset where a section starts, offset where its body starts, heading path)
    sections: list[tuple[int, int, tuple[str, ...]]] = [(0, 0, ())]
    stack: list[tuple[int, str]] = []
    title = ""
    for i, token in enumerate(tokens):
        if token.type != "heading_open" or token.map is None or token.level != 0:
            continue
        level = int(token.tag[1])
        heading = tokens[i + 1].content.strip() if i + 1 < len(tokens) else ""
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, heading))
        title = title or (heading if level == 1 else "")
        body = line_starts[token.map[1]] if token.map[1] < len(line_starts) else len(text)
        sections.append((line_starts[token.map[0]], body, tuple(h for _, h in stack)))
    segments = []
    carried: int | None = None  # start of headings with no body of their own
    ends = [start for start, _, _ in sections[1:]] + [len(text)]
    for k, ((start, body, path), end) in enumerate(zip(sections, ends, strict=True)):
        start, end = _strip_span(text, start, end)
        if end <= start:
            continue
        next_path = sections[k + 1][2] if k + 1 < len(sections) else ()
        if not text[body:end].strip() and path and next_path[: len(path)] == path:
            # NOTE: a heading directly followed by its first sub-heading joins that sub-section,
            # rather than becoming a chunk of its own with nothing but the title in it.
            carried = start if carried is None else carried
            continue
        segments.append(Segment(start if carried is None else carried, end, None, path))
        carried = None
    return ParsedDocument(text, segments, kind, mime_type, title)
