"""Reads `<tool_call>` blocks out of generated text, whole or as OpenAI streaming deltas.

The `arguments` of a call are the raw JSON text the model wrote for it, so the concatenation of
the streamed argument deltas is exactly the final `arguments` string.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from inference.grammar.tools import TOOL_CALL_END, TOOL_CALL_START

_HEADER = re.compile(r'\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*')


def new_tool_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


@dataclass
class ToolCallDelta:
    """What one `feed` produced: a content delta and OpenAI `delta.tool_calls` entries."""

    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ParsedOutput:
    content: str | None
    tool_calls: list[dict[str, Any]]
    # A `<tool_call>` was opened but not closed (the output was cut, finish_reason "length").
    incomplete_call: bool


class _ArgumentsScanner:
    """Finds where one JSON value ends in a stream of characters."""

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = False
        self.escaped = False
        self.started = False

    def consume(self, text: str) -> int | None:
        """Number of characters of `text` that belong to the value if it ends inside `text`."""
        for i, ch in enumerate(text):
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif ch == "\\":
                    self.escaped = True
                elif ch == '"':
                    self.in_string = False
                    if self.depth == 0:
                        return i + 1
            elif ch == '"':
                self.in_string = True
            elif ch in "{[":
                self.depth += 1
            elif ch in "}]":
                if self.depth == 0:
                    return i  # a scalar ended at the enclosing object's brace
                self.depth -= 1
                if self.depth == 0:
                    return i + 1
            elif self.depth == 0 and self.started and (ch.isspace() or ch == ","):
                return i
            self.started = True
        return None


class ToolCallParser:
    """Incremental parser: `feed` each text delta, then `finish` once; `result()` at any time."""

    def __init__(self, id_factory: Callable[[], str] = new_tool_call_id) -> None:
        self._new_id = id_factory
        self._buffer = ""
        self._state = "text"  # text -> header -> arguments -> closing -> text
        self._content: list[str] = []
        self._calls: list[dict[str, Any]] = []
        self._closed = 0  # calls complete in order, so only the last one can still be open
        self._after_call = False  # whitespace separating calls is layout, not content
        self._scanner = _ArgumentsScanner()

    def feed(self, text: str) -> ToolCallDelta:
        self._buffer += text
        delta = ToolCallDelta()
        while self._step(delta):
            pass
        return delta

    def finish(self) -> ToolCallDelta:
        """End of output: text held back as a possible `<tool_call>` prefix is content after all."""
        delta = ToolCallDelta()
        if self._state == "text" and self._buffer:
            self._emit_content(delta, self._buffer)
            self._buffer = ""
        return delta

    def result(self) -> ParsedOutput:
        content = "".join(self._content)
        return ParsedOutput(
            content=content if content.strip() else None,
            tool_calls=copy.deepcopy(self._calls[: self._closed]),
            incomplete_call=self._state != "text",
        )

    def _step(self, delta: ToolCallDelta) -> bool:
        """Make progress on the buffer; False when more text is needed."""
        if self._state == "text":
            start = self._buffer.find(TOOL_CALL_START)
            if start < 0:
                keep = _partial_suffix(self._buffer, TOOL_CALL_START)
                self._emit_content(delta, self._buffer[: len(self._buffer) - keep])
                self._buffer = self._buffer[len(self._buffer) - keep :]
                return False
            self._emit_content(delta, self._buffer[:start])
            self._buffer = self._buffer[start + len(TOOL_CALL_START) :]
            self._state = "header"
            return True
        if self._state == "header":
            match = _HEADER.match(self._buffer)
            # NOTE: wait for the first character of the arguments, so that whitespace still to
            # come after "arguments": is not taken for part of them.
            if match is None or match.end() == len(self._buffer):
                return False
            self._open_call(delta, json.loads(f'"{match.group(1)}"'))
            self._buffer = self._buffer[match.end() :]
            self._state = "arguments"
            self._scanner = _ArgumentsScanner()
            return True
        if self._state == "arguments":
            end = self._scanner.consume(self._buffer)
            piece = self._buffer if end is None else self._buffer[:end]
            self._emit_arguments(delta, piece)
            self._buffer = self._buffer[len(piece) :]
            if end is None:
                return False
            self._state = "closing"
            return True
        close = self._buffer.find(TOOL_CALL_END)
        if close < 0:
            return False
        self._closed += 1
        self._after_call = True
        self._buffer = self._buffer[close + len(TOOL_CALL_END) :]
        self._state = "text"
        return True

    def _emit_content(self, delta: ToolCallDelta, text: str) -> None:
        if self._after_call:
            text = text.lstrip()
            self._after_call = not text
        if text:
            self._content.append(text)
            delta.content += text

    def _open_call(self, delta: ToolCallDelta, name: str) -> None:
        call = {"id": self._new_id(), "type": "function", "function": {"name": name, "arguments": ""}}
        self._calls.append(call)
        delta.tool_calls.append({"index": len(self._calls) - 1, **copy.deepcopy(call)})

    def _emit_arguments(self, delta: ToolCallDelta, text: str) -> None:
        if not text:
            return
        self._calls[-1]["function"]["arguments"] += text
        delta.tool_calls.append({"index": len(self._calls) - 1, "function": {"arguments": text}})


def parse_tool_calls(text: str) -> ParsedOutput:
    """Parse a whole generated text (non-streaming responses)."""
    parser = ToolCallParser()
    parser.feed(text)
    parser.finish()
    return parser.result()


def _partial_suffix(text: str, marker: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of `marker`."""
    for size in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-size:]):
            return size
    return 0
