"""Parsing and validating structured-output request fields (no tokenizer needed)."""

from __future__ import annotations

import pytest

from inference.grammar import parse_structured_output
from inference.protocol import InvalidRequestError

pytestmark = pytest.mark.unit

OBJECT = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def _schema_format(schema, strict=None) -> dict:
    body = {"name": "answer", "schema": schema}
    if strict is not None:
        body["strict"] = strict
    return {"response_format": {"type": "json_schema", "json_schema": body}}


@pytest.mark.parametrize(
    ("request_body", "kind"),
    [
        ({"response_format": {"type": "json_object"}}, "json_object"),
        (_schema_format(OBJECT, strict=True), "json_schema"),
        ({"structured_outputs": {"json": OBJECT}}, "json_schema"),
        ({"guided_json": '{"type": "integer"}'}, "json_schema"),
        ({"structured_outputs": {"regex": "[a-z]+"}}, "regex"),
        ({"guided_regex": "\\d{3}"}, "regex"),
        ({"structured_outputs": {"grammar": 'root ::= "yes" | "no"'}}, "grammar"),
        ({"guided_grammar": 'root ::= "a"+'}, "grammar"),
        ({"guided_choice": ["yes", "no"]}, "choice"),
        ({"structured_outputs": {"json_object": True}}, "json_object"),
        ({"tools": [WEATHER]}, "tools"),
        ({"tools": [WEATHER], "tool_choice": "required"}, "tools"),
        (
            {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
            "tools",
        ),
    ],
)
def test_parses_each_kind(request_body, kind):
    spec = parse_structured_output(request_body)
    assert spec is not None and spec.kind == kind
    assert spec.grammar is not None


@pytest.mark.parametrize(
    "request_body",
    [
        {},
        {"response_format": {"type": "text"}},
        {"tools": [WEATHER], "tool_choice": "none"},
        {"tool_choice": "none"},
        {"structured_outputs": {"json_object": False}},
    ],
)
def test_unconstrained_requests(request_body):
    assert parse_structured_output(request_body) is None


def test_tool_choice_modes_and_defaults():
    auto = parse_structured_output({"tools": [WEATHER]})
    named = parse_structured_output(
        {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
    )
    assert auto.tool_choice == ("auto", None) and auto.produces_tool_calls
    assert named.tool_choice == ("named", "get_weather")
    no_params = parse_structured_output({"tools": [{"type": "function", "function": {"name": "ping"}}]})
    assert no_params.tools[0]["parameters"]["type"] == "object"


def test_cache_key_identifies_the_constraint():
    same = [parse_structured_output(_schema_format(OBJECT)), parse_structured_output({"guided_json": OBJECT})]
    reordered = {"type": "object", "properties": {"b": {"type": "null"}, "a": {"type": "null"}}}
    others = [
        parse_structured_output(_schema_format({"type": "object"})),
        parse_structured_output(_schema_format(OBJECT, strict=True)),
        parse_structured_output(_schema_format(reordered)),
        parse_structured_output(
            _schema_format({**reordered, "properties": dict(reversed(reordered["properties"].items()))})
        ),
    ]
    assert same[0].cache_key == same[1].cache_key
    assert len({same[0].cache_key, *(o.cache_key for o in others)}) == 1 + len(others)


@pytest.mark.parametrize(
    ("request_body", "reason"),
    [
        # meta-schema violations, reported with the path of the offending keyword
        (_schema_format({"type": "strin"}), "not a valid JSON schema at type"),
        (_schema_format({"type": "string", "minLength": -1}), "at minLength"),
        (_schema_format({"type": "object", "properties": 3}), "at properties"),
        (_schema_format([1, 2]), "must be a JSON object"),
        ({"guided_json": "{not json"}, "not valid JSON"),
        # valid JSON schemas that xgrammar cannot turn into a grammar
        (_schema_format({"$ref": "#/$defs/missing"}), "Cannot find field '$defs'"),
        (_schema_format({"type": "integer", "minimum": 5, "maximum": 1}), "minimum greater than maximum"),
        (_schema_format({"type": "string", "minLength": 5, "maxLength": 2}), "minLength 5 is greater"),
        # strict refuses what the grammar would silently drop
        (
            _schema_format({"type": "string", "pattern": "a+", "maxLength": 3}, strict=True),
            "pattern combined",
        ),
        (_schema_format(OBJECT, strict="yes"), "strict must be a boolean"),
        ({"response_format": {"type": "xml"}}, "response_format.type"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, "with a 'schema'"),
        ({"guided_regex": "(abc"}, "parenthesis is not closed"),
        ({"guided_grammar": "root ::= foo"}, 'Rule "foo" is not defined'),
        ({"guided_choice": []}, "non-empty list"),
        ({"structured_outputs": {"jsonn": {}}}, "structured_outputs must be"),
        ({"guided_regex": "a", "response_format": {"type": "json_object"}}, "only one output constraint"),
        ({"tools": [WEATHER], "response_format": {"type": "json_object"}}, "only one output constraint"),
    ],
)
def test_invalid_constraints_are_rejected_with_a_reason(request_body, reason):
    with pytest.raises(InvalidRequestError) as info:
        parse_structured_output(request_body)
    assert reason in str(info.value)


def test_non_strict_schema_keeps_what_it_can():
    spec = parse_structured_output(_schema_format({"type": "string", "pattern": "a+", "maxLength": 3}))
    assert spec.kind == "json_schema" and not spec.strict


def _tool(name="f", parameters=None, **extra) -> dict:
    function = {"name": name, **extra}
    if parameters is not None:
        function["parameters"] = parameters
    return {"type": "function", "function": function}


@pytest.mark.parametrize(
    ("tools", "tool_choice", "reason"),
    [
        ([], None, "non-empty list"),
        ([{"type": "retrieval"}], None, "tools[0].type must be 'function'"),
        ([_tool("bad name")], None, "tools[0].function.name must match"),
        ([_tool("f"), _tool("f")], None, "duplicate tool name"),
        (
            [_tool(parameters={"type": "object", "properties": {"x": {"type": 12}}})],
            None,
            "not a valid JSON schema",
        ),
        ([_tool(parameters={"type": "string"})], None, "of type 'object'"),
        (
            [_tool(parameters={"type": "object", "properties": {"x": {"$ref": "#/nope"}}})],
            None,
            "cannot build",
        ),
        (
            [
                _tool(
                    parameters={
                        "type": "object",
                        "properties": {"x": {"type": "string", "format": "date", "maxLength": 3}},
                    },
                    strict=True,
                )
            ],
            None,
            "format combined with maxLength",
        ),
        ([_tool()], {"type": "function", "function": {"name": "g"}}, "not in tools"),
        ([_tool()], "sometimes", "tool_choice must be"),
        (None, "required", "tool_choice requires tools"),
    ],
)
def test_invalid_tools_are_rejected(tools, tool_choice, reason):
    body = {"tool_choice": tool_choice}
    if tools is not None:
        body["tools"] = tools
    with pytest.raises(InvalidRequestError) as info:
        parse_structured_output(body)
    assert reason in str(info.value)
