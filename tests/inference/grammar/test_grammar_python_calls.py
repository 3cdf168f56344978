"""Python-syntax tool calls: the grammar decoded by a random model always reads back into calls that
validate against their schemas; the reader takes what unconstrained models write."""

from __future__ import annotations

import json

import jsonschema
import pytest

from inference.grammar.python_call_parser import PythonCallParser, parse_python_calls, parse_python_turn
from inference.grammar.python_calls import calls_text
from inference.grammar.spec import tools_spec
from inference.protocol import InvalidRequestError
from tests.inference.grammar.random_model import generate
from tests.inference.grammar.test_grammar_tool_calls import _eos_bias

pytestmark = pytest.mark.unit

PARAMETERS = {
    "book": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1, "maxLength": 12},
            "guests": {"type": "integer", "minimum": 1, "maximum": 12},
            "when": {"enum": ["lunch", "dinner"]},
            "notes": {
                "type": "array",
                "items": {"type": "string", "maxLength": 8},
                "minItems": 1,
                "maxItems": 2,
            },
            "extras": {
                "type": "object",
                "properties": {"vegan": {"type": "boolean"}, "budget": {"type": ["number", "null"]}},
                "required": ["budget"],
            },
        },
        "required": ["city", "guests"],
    },
    "ping": {"type": "object", "properties": {}},
    "convert-units": {
        "type": "object",
        "properties": {"value": {"type": "number"}, "to": {"type": "string", "maxLength": 6}},
        "required": ["value"],
    },
}
TOOLS = [{"type": "function", "function": {"name": n, "parameters": p}} for n, p in PARAMETERS.items()]


def _decode(service, tokenizer, choice, parallel: bool, n: int, seed: int, prefix="", eos=True):
    spec = tools_spec(TOOLS, choice, parallel, "python")
    grammars = [service.sequence_grammar(spec) for _ in range(n)]
    # NOTE: without the bias for text: xgrammar reads SmolLM2's EOS as the text "<|im_end|>", which
    # free text may hold, so a biased random model would end every text turn at once.
    bias = _eos_bias(service, tokenizer) if eos else None
    prefix_ids = tuple(tokenizer.encode(prefix, add_special_tokens=False))
    return generate(service, grammars, tokenizer, max_tokens=160, seed=seed, bias=bias, prefix_ids=prefix_ids)


def _checked_calls(text: str) -> list[tuple[str, dict]]:
    parsed = parse_python_calls(text)
    assert parsed.tool_calls and parsed.content is None and not parsed.incomplete_call, text
    calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in parsed.tool_calls]
    for name, arguments in calls:
        jsonschema.validate(arguments, PARAMETERS[name])
    return calls


def test_required_turns_read_back_as_valid_calls(service, smollm2_tokenizer):
    outputs = _decode(service, smollm2_tokenizer, "required", parallel=True, n=16, seed=0)
    finished = [o for o in outputs if o.finish_reason == "stop"]
    assert len(finished) >= 10
    names = set()
    for output in finished:
        assert output.text.startswith("[")
        names |= {name for name, _ in _checked_calls(output.text)}
    assert len(names) >= 2  # the random model reaches more than one function


def test_named_function_and_single_call(service, smollm2_tokenizer):
    named = {"type": "function", "function": {"name": "book"}}
    for output in _decode(service, smollm2_tokenizer, named, parallel=True, n=8, seed=1):
        if output.finish_reason == "stop":
            assert {name for name, _ in _checked_calls(output.text)} == {"book"}
    single = [
        o
        for o in _decode(service, smollm2_tokenizer, "required", False, n=8, seed=2)
        if o.finish_reason == "stop"
    ]
    assert single and all(len(_checked_calls(o.text)) == 1 for o in single)


def test_auto_turns_are_calls_or_text_that_never_reads_as_calls(service, smollm2_tokenizer):
    # Random logits almost never pick "[" among the whole vocabulary: the call branch is forced.
    texts = _decode(service, smollm2_tokenizer, "auto", parallel=True, n=12, seed=3, eos=False)
    for output in texts:
        assert output.text[:1] not in ("[", " ", "\n", "\t", "\r", ""), repr(output.text)
        parsed = parse_python_turn(output.text)
        assert parsed.tool_calls == [] and parsed.content == output.text
    calls = _decode(service, smollm2_tokenizer, "auto", parallel=True, n=8, seed=4, prefix="[")
    finished = [o for o in calls if o.finish_reason == "stop"]
    assert finished
    for output in finished:
        _checked_calls(output.text)
        assert len(parse_python_turn(output.text).tool_calls) == len(_checked_calls(output.text))
    text = 'See [book(city="Oslo", guests=2)]'  # free text that names a call is still text
    assert parse_python_turn(text).tool_calls == [] and parse_python_turn(text).content == text


def test_streamed_turns_hold_a_call_list_until_it_ends():
    parser = PythonCallParser()
    pieces = ["[book(", 'city="Oslo", gu', "ests=2), ping", "()]"]
    assert all(parser.feed(p).content == "" and not parser.feed("").tool_calls for p in pieces)
    assert parser.result().incomplete_call
    end = parser.finish()
    assert [c["index"] for c in end.tool_calls] == [0, 1] and end.content == ""
    assert json.loads(end.tool_calls[0]["function"]["arguments"]) == {"city": "Oslo", "guests": 2}
    whole = [{k: v for k, v in c.items() if k != "index"} for c in end.tool_calls]
    assert parser.result().tool_calls == whole
    prose = PythonCallParser()
    assert [prose.feed(p).content for p in ("Bonjour", " !")] == ["Bonjour", " !"]
    assert prose.finish().content == "" and prose.result().content == "Bonjour !"


def test_a_cut_turn_is_no_call():
    parsed = parse_python_calls('[book(city="Oslo", guests=')
    assert parsed.tool_calls == [] and parsed.incomplete_call


def test_written_calls_read_back_unchanged():
    calls = [
        ("book", {"city": "Saint-Malo", "guests": 2, "extras": {"vegan": True, "budget": None}}),
        ("convert-units", {"value": -1.5e-3, "to": "m"}),
        ("ping", {}),
    ]
    text = calls_text(calls)
    assert text.startswith('[book(city="Saint-Malo", guests=2, extras={"vegan": True')
    parsed = parse_python_calls(text)
    assert [
        (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in parsed.tool_calls
    ] == calls


def test_reader_takes_what_unconstrained_models_write():
    text = "Sure.\n[book(city='Oslo', guests=4, notes=('window',), extras={'budget': null}), ping()]\nDone."
    parsed = parse_python_calls(text)
    assert [c["function"]["name"] for c in parsed.tool_calls] == ["book", "ping"]
    assert json.loads(parsed.tool_calls[0]["function"]["arguments"]) == {
        "city": "Oslo",
        "guests": 4,
        "notes": ["window"],
        "extras": {"budget": None},
    }
    assert parsed.content == "Sure.\n\nDone."
    prose = parse_python_calls("The list [1, 2] has no calls; neither has f(x).")
    assert prose.tool_calls == [] and not prose.incomplete_call


def test_tool_choice_none_is_refused_in_either_layout():
    with pytest.raises(InvalidRequestError, match="no tool call"):
        tools_spec(TOOLS, "none", True, "python")
