"""Reads a turn of Python-syntax tool calls (`python_calls.py`) back into OpenAI tool calls.

A hand-written reader rather than `ast`: function and argument names need not be Python
identifiers (tool names may hold '-'; a schema may name an argument `class`), and unconstrained
output may quote strings with ' or spell JSON's true/null. The calls are the first `[name(`
list in the text that reads whole; anything else the model wrote is content.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from inference.grammar.tool_parser import ParsedOutput, ToolCallDelta, new_tool_call_id

_NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*")
_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_WORDS = {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None}
_START = re.compile(r"\[\s*[A-Za-z_][A-Za-z0-9_.\-]*\s*\(")


class _Unreadable(ValueError):
    pass


def parse_python_calls(text: str) -> ParsedOutput:
    """The calls of the first complete `[f(a=1), g(b="x")]` list in `text`, the rest as content."""
    for start in (m.start() for m in _START.finditer(text)):
        reader = _Reader(text, start)
        try:
            calls = reader.calls()
        except _Unreadable:
            continue
        content = (text[:start] + text[reader.pos :]).strip()
        tool_calls = [
            {
                "id": new_tool_call_id(),
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
            }
            for name, arguments in calls
        ]
        return ParsedOutput(content or None, tool_calls, incomplete_call=False)
    # A list opened as calls but never closed: the output was cut (finish_reason "length").
    return ParsedOutput(text.strip() or None, [], incomplete_call=bool(_START.search(text)))


class PythonCallParser:
    """A constrained turn read as it streams (`feed` each delta, `finish` once, `result()`), as
    `tool_parser.ToolCallParser` reads `<tool_call>` blocks.

    The grammar (python_calls.py) makes a turn either a call list, which starts with "[", or, under
    tool_choice "auto", text that starts otherwise. Text streams as content; a call list is held
    back and read whole at the end, because its arguments are Python literals, not the JSON text
    that OpenAI's `arguments` deltas carry.
    """

    def __init__(self) -> None:
        self._text = ""
        self._parsed: ParsedOutput | None = None

    def feed(self, text: str) -> ToolCallDelta:
        self._text += text
        return ToolCallDelta() if self._text.startswith("[") else ToolCallDelta(content=text)

    def finish(self) -> ToolCallDelta:
        if not self._text.startswith("["):
            return ToolCallDelta()
        self._parsed = parse_python_calls(self._text)
        calls = [{"index": i, **call} for i, call in enumerate(self._parsed.tool_calls)]
        return ToolCallDelta(self._parsed.content or "", calls)

    def result(self) -> ParsedOutput:
        if self._parsed is not None:
            return self._parsed
        if self._text.startswith("["):  # not finished: the list may still be open
            return ParsedOutput(None, [], incomplete_call=True)
        return ParsedOutput(self._text if self._text.strip() else None, [], incomplete_call=False)


def parse_python_turn(text: str) -> ParsedOutput:
    """A whole constrained turn (non-streaming responses); `parse_python_calls` reads free text."""
    parser = PythonCallParser()
    parser.feed(text)
    parser.finish()
    return parser.result()


class _Reader:
    def __init__(self, text: str, pos: int) -> None:
        self.text, self.pos = text, pos

    def calls(self) -> list[tuple[str, dict[str, Any]]]:
        self.expect("[")
        found = [self.call()]
        while self.skip(","):
            found.append(self.call())
        self.expect("]")
        return found

    def call(self) -> tuple[str, dict[str, Any]]:
        name = self.name()
        self.expect("(")
        arguments: dict[str, Any] = {}
        if not self.skip(")"):
            while True:
                key = self.name()
                self.expect("=")
                arguments[key] = self.value()
                if self.skip(")"):
                    break
                self.expect(",")
        return name, arguments

    def name(self) -> str:
        match = _NAME.match(self.text, self.pos)
        if match is None:
            raise _Unreadable(f"a name expected at {self.pos}")
        self.pos = match.end()
        return match.group(1)

    def value(self) -> Any:
        self.space()
        ch = self.text[self.pos : self.pos + 1]
        if ch in ("'", '"'):
            return self.string(ch)
        if ch in ("[", "("):
            return self.sequence("]" if ch == "[" else ")")
        if ch == "{":
            return self.mapping()
        if number := _NUMBER.match(self.text, self.pos):
            self.pos = number.end()
            return int(number.group()) if number.group().lstrip("-").isdigit() else float(number.group())
        word = _NAME.match(self.text, self.pos)
        if word is None or word.group(1) not in _WORDS:
            raise _Unreadable(f"a value expected at {self.pos}")
        self.pos = word.end()
        return _WORDS[word.group(1)]

    def string(self, quote: str) -> str:
        end = self.pos + 1
        while end < len(self.text) and self.text[end] != quote:
            end += 2 if self.text[end] == "\\" else 1
        if end >= len(self.text):
            raise _Unreadable("a string is not closed")
        try:
            value = ast.literal_eval(self.text[self.pos : end + 1])
        except (ValueError, SyntaxError) as exc:
            raise _Unreadable(str(exc)) from exc
        self.pos = end + 1
        return value

    def sequence(self, close: str) -> list[Any]:
        self.pos += 1
        items: list[Any] = []
        while not self.skip(close):
            if items:
                self.expect(",")
                if self.skip(close):  # a trailing comma
                    break
            items.append(self.value())
        return items

    def mapping(self) -> dict[str, Any]:
        self.pos += 1
        entries: dict[str, Any] = {}
        while not self.skip("}"):
            if entries:
                self.expect(",")
                if self.skip("}"):
                    break
            key = self.value()
            self.expect(":")
            entries[str(key)] = self.value()
        return entries

    def space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def skip(self, token: str) -> bool:
        self.space()
        if self.text.startswith(token, self.pos):
            self.pos += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.skip(token):
            raise _Unreadable(f"{token!r} expected at {self.pos}")
