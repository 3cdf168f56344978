"""Tool-call grammars decoded by a random model, then read back by the (streaming) parser."""

from __future__ import annotations

import codecs
import itertools
import json

import jsonschema
import pytest
import torch

from inference.grammar import ToolCallParser, parse_structured_output, parse_tool_calls
from inference.protocol import InvalidRequestError
from tests.inference.grammar.random_model import Generation, generate

pytestmark = pytest.mark.unit

PARAMETERS = {
    "get_weather": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1, "maxLength": 20},
            "unit": {"enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
    "add": {
        "type": "object",
        "properties": {"a": {"type": "integer", "minimum": -50, "maximum": 50}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
    "search": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "maxLength": 30},
            "limit": {"type": "integer", "minimum": 1, "maximum": 10},
            "filters": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
}
TOOLS = [{"type": "function", "function": {"name": n, "parameters": p}} for n, p in PARAMETERS.items()]
TOOLS.append({"type": "function", "function": {"name": "ping", "description": "no arguments"}})
PARAMETERS["ping"] = {"type": "object", "properties": {}, "additionalProperties": False}


def _eos_bias(service, tokenizer) -> torch.Tensor:
    """Random text rarely ends on its own: make EOS the likely pick wherever the grammar allows it."""
    bias = torch.zeros(service.vocab_size)
    bias[tokenizer.eos_token_id] = 6.0
    return bias


def _decode(service, tokenizer, request: dict, n: int, prefix: str = "", seed: int = 0) -> list[Generation]:
    spec = parse_structured_output({"tools": TOOLS, **request})
    prefix_ids = tuple(tokenizer.encode(prefix, add_special_tokens=False))
    grammars = [service.sequence_grammar(spec) for _ in range(n)]
    return generate(
        service,
        grammars,
        tokenizer,
        max_tokens=140,
        seed=seed,
        bias=_eos_bias(service, tokenizer),
        prefix_ids=prefix_ids,
    )


def _assert_valid_calls(calls: list[dict], allowed: set[str]) -> None:
    for call in calls:
        name = call["function"]["name"]
        assert name in allowed
        jsonschema.validate(json.loads(call["function"]["arguments"]), PARAMETERS[name])


def _streamed(vocab: list[bytes], output: Generation) -> list[dict]:
    """Stream the output token by token, as the server would, and merge the deltas."""
    counter = itertools.count()
    parser = ToolCallParser(id_factory=lambda: f"call_{next(counter)}")
    utf8 = codecs.getincrementaldecoder("utf-8")()
    calls: dict[int, dict] = {}
    deltas = [parser.feed(utf8.decode(vocab[t])) for t in output.token_ids]
    for delta in [*deltas, parser.finish()]:
        for entry in delta.tool_calls:
            call = calls.setdefault(
                entry["index"], {"id": entry.get("id"), "type": "function", "function": {}}
            )
            function = call["function"]
            function.setdefault("name", entry["function"].get("name"))
            function["arguments"] = function.get("arguments", "") + entry["function"]["arguments"]
    return [calls[i] for i in sorted(calls)]


def _check_stream_matches(vocab: list[bytes], output: Generation) -> None:
    counter = itertools.count()
    whole = ToolCallParser(id_factory=lambda: f"call_{next(counter)}")
    whole.feed(output.text)
    whole.finish()
    assert _streamed(vocab, output) == whole.result().tool_calls


def test_required_always_calls_valid_tools(service, smollm2_tokenizer, decoded_vocab):
    outputs = _decode(service, smollm2_tokenizer, {"tool_choice": "required"}, n=16)
    finished = [o for o in outputs if o.finish_reason == "stop"]
    assert len(finished) >= 12
    for output in finished:
        parsed = parse_tool_calls(output.text)
        assert parsed.tool_calls and not parsed.incomplete_call
        assert output.text.startswith("<tool_call>\n{")
        _assert_valid_calls(parsed.tool_calls, set(PARAMETERS))
        _check_stream_matches(decoded_vocab, output)


def test_named_function_is_called_exactly_once(service, smollm2_tokenizer, decoded_vocab):
    choice = {"type": "function", "function": {"name": "search"}}
    outputs = _decode(service, smollm2_tokenizer, {"tool_choice": choice}, n=12, seed=1)
    finished = [o for o in outputs if o.finish_reason == "stop"]
    assert len(finished) >= 9
    for output in finished:
        parsed = parse_tool_calls(output.text)
        assert [c["function"]["name"] for c in parsed.tool_calls] == ["search"] and parsed.content is None
        _assert_valid_calls(parsed.tool_calls, {"search"})
        _check_stream_matches(decoded_vocab, output)


def test_auto_allows_free_text_and_validates_a_started_call(service, smollm2_tokenizer, decoded_vocab):
    text_only = _decode(service, smollm2_tokenizer, {}, n=4, prefix="It is sunny.", seed=2)
    for output in text_only:
        assert output.finish_reason == "stop" and parse_tool_calls(output.text).tool_calls == []

    outputs = _decode(
        service, smollm2_tokenizer, {"tool_choice": "auto"}, n=12, prefix="Let me check. <tool_call>", seed=3
    )
    finished = [o for o in outputs if o.finish_reason == "stop"]
    assert len(finished) >= 9
    for output in finished:
        parsed = parse_tool_calls(output.text)
        assert parsed.content.startswith("Let me check.") and parsed.tool_calls
        _assert_valid_calls(parsed.tool_calls, set(PARAMETERS))
        _check_stream_matches(decoded_vocab, output)


def test_a_call_cut_by_max_tokens_is_not_reported_complete(service, smollm2_tokenizer):
    spec = parse_structured_output({"tools": TOOLS, "tool_choice": "required"})
    grammars = [service.sequence_grammar(spec) for _ in range(4)]
    for output in generate(service, grammars, smollm2_tokenizer, max_tokens=12, seed=4):
        assert output.finish_reason == "length"
        parsed = parse_tool_calls(output.text)
        assert parsed.incomplete_call and parsed.tool_calls == []


def test_parallel_tool_calls_false_allows_one_call(service, smollm2_tokenizer):
    outputs = _decode(
        service, smollm2_tokenizer, {"tool_choice": "required", "parallel_tool_calls": False}, n=8, seed=5
    )
    finished = [o for o in outputs if o.finish_reason == "stop"]
    assert finished
    for output in finished:
        assert len(parse_tool_calls(output.text).tool_calls) == 1


# BFCL live_multiple: an array parameter whose enum lists strings; no value satisfies it.
SENSORS = {
    "type": "object",
    "properties": {
        "timespan": {"type": "integer", "minimum": 1, "maximum": 9999},
        "models": {"type": "array", "items": {"type": "string"}, "enum": ["MT10", "MT11"]},
    },
    "required": ["timespan"],
}


def test_a_property_no_value_satisfies_is_never_emitted(service, smollm2_tokenizer):
    tools = [{"type": "function", "function": {"name": "sensors", "parameters": SENSORS}}]
    spec = parse_structured_output({"tools": tools, "tool_choice": "required"})
    grammars = [service.sequence_grammar(spec) for _ in range(16)]
    bias = _eos_bias(service, smollm2_tokenizer)
    outputs = generate(service, grammars, smollm2_tokenizer, max_tokens=140, seed=1, bias=bias)
    finished = [o for o in outputs if o.finish_reason == "stop"]
    assert len(finished) >= 8
    for output in finished:
        for call in parse_tool_calls(output.text).tool_calls:
            arguments = json.loads(call["function"]["arguments"])
            assert "models" not in arguments
            jsonschema.validate(arguments, SENSORS)  # against the schema as the caller wrote it


def test_a_required_property_no_value_satisfies_is_a_bad_request():
    required = {**SENSORS, "required": ["timespan", "models"]}
    tools = [{"type": "function", "function": {"name": "sensors", "parameters": required}}]
    with pytest.raises(InvalidRequestError, match="models can never be satisfied"):
        parse_structured_output({"tools": tools, "tool_choice": "required"})
