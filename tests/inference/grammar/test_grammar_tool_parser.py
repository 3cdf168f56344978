"""The `<tool_call>` parser, whole and streamed in arbitrary pieces."""

from __future__ import annotations

import itertools
import json

import pytest

from inference.grammar import ToolCallParser, parse_tool_calls

pytestmark = pytest.mark.unit

TWO_CALLS = (
    "Let me check. <tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris", "note": "a } and </tool_call> \\" inside"}}\n'
    "</tool_call>\n<tool_call>\n"
    '{"name": "lookup", "arguments": {"q": [1, {"x": []}], "n": null}}\n'
    "</tool_call>"
)


def _ids():
    counter = itertools.count()
    return lambda: f"call_{next(counter)}"


def _stream(text: str, pieces: list[int]):
    """Feed `text` cut at `pieces` boundaries; returns the parser and the OpenAI-style merged deltas."""
    parser = ToolCallParser(id_factory=_ids())
    content, calls = "", {}
    cuts = [0, *pieces, len(text)]
    deltas = [parser.feed(text[a:b]) for a, b in itertools.pairwise(cuts)] + [parser.finish()]
    for delta in deltas:
        content += delta.content
        for entry in delta.tool_calls:
            call = calls.setdefault(entry["index"], {"function": {"name": None, "arguments": ""}})
            if "id" in entry:
                call["id"], call["type"] = entry["id"], entry["type"]
                call["function"]["name"] = entry["function"]["name"]
            call["function"]["arguments"] += entry["function"]["arguments"]
    return parser, content, [calls[i] for i in sorted(calls)]


def test_parses_calls_and_content():
    parsed = parse_tool_calls(TWO_CALLS)
    assert parsed.content == "Let me check. "
    assert not parsed.incomplete_call
    assert [c["function"]["name"] for c in parsed.tool_calls] == ["get_weather", "lookup"]
    first = json.loads(parsed.tool_calls[0]["function"]["arguments"])
    assert first == {"city": "Paris", "note": 'a } and </tool_call> " inside'}
    assert json.loads(parsed.tool_calls[1]["function"]["arguments"]) == {"q": [1, {"x": []}], "n": None}
    assert all(c["type"] == "function" and c["id"].startswith("call_") for c in parsed.tool_calls)
    assert len({c["id"] for c in parsed.tool_calls}) == 2


@pytest.mark.parametrize("step", [1, 2, 3, 7, 13])
def test_streaming_in_any_pieces_rebuilds_the_same_calls(step):
    whole = ToolCallParser(id_factory=_ids())
    whole.feed(TWO_CALLS)
    whole.finish()
    parser, content, calls = _stream(TWO_CALLS, list(range(step, len(TWO_CALLS), step)))
    assert content == "Let me check. "
    assert calls == whole.result().tool_calls == parser.result().tool_calls


def test_partial_marker_is_held_back_then_released():
    parser = ToolCallParser()
    assert parser.feed("x < y <tool_").content == "x < y "
    assert parser.finish().content == "<tool_"
    assert parser.result().content == "x < y <tool_" and parser.result().tool_calls == []


def test_plain_text_is_content_only():
    parsed = parse_tool_calls("No tools needed, 2 < 3.")
    assert parsed.content == "No tools needed, 2 < 3." and parsed.tool_calls == []


def test_a_cut_call_is_reported_incomplete():
    cut = TWO_CALLS[: TWO_CALLS.index('"n": null')]
    parsed = parse_tool_calls(cut)
    assert parsed.incomplete_call
    assert [c["function"]["name"] for c in parsed.tool_calls] == ["get_weather"]


def test_name_arrives_before_arguments_when_streaming():
    parser = ToolCallParser(id_factory=_ids())
    first = parser.feed('<tool_call>\n{"name": "get_weather", "arguments": {"ci')
    assert first.tool_calls[0] == {
        "index": 0,
        "id": "call_0",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
    }
    assert first.tool_calls[1] == {"index": 0, "function": {"arguments": '{"ci'}}
    rest = parser.feed('ty": "Rome"}}\n</tool_call> done')
    assert "".join(d["function"]["arguments"] for d in rest.tool_calls) == 'ty": "Rome"}'
    assert rest.content == "done"
