"""Output constraints through the OpenAI API: response_format, vLLM's guided fields, tool calls."""

from __future__ import annotations

import json
import uuid

import jsonschema
import openai
import pytest

from tests.inference.server.conftest import MODEL_NAME
from tests.support.grammar import grammar_builds

pytestmark = pytest.mark.slow

CITY_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 20}},
    "required": ["city"],
    "additionalProperties": False,
}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": CITY_SCHEMA,
    },
}
ASK_WEATHER = [{"role": "user", "content": "What is the weather like in Paris today?"}]
# ASK_WEATHER, the model's get_weather call for Paris and its result.
PARIS_WEATHER_GIVEN = [
    *ASK_WEATHER,
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 24 degrees Celsius."},
]


def weather_turn(client, messages: list[dict], tool_choice: str, max_tokens: int):
    """A greedy chat turn offered get_weather: the whole response."""
    return client.chat.completions.create(
        model=MODEL_NAME,
        messages=messages,
        tools=[WEATHER_TOOL],
        tool_choice=tool_choice,
        max_tokens=max_tokens,
        temperature=0,
    )


def auto_turn(client, messages: list[dict], max_tokens: int):
    """A greedy `tool_choice: "auto"` turn: valid get_weather calls or some text."""
    choice = weather_turn(client, messages, "auto", max_tokens).choices[0]
    if choice.message.tool_calls:
        assert_weather_calls(choice)
    else:
        assert choice.message.content
    return choice


def assert_weather_calls(choice) -> None:
    """The turn called get_weather, every call valid against its schema."""
    assert choice.finish_reason == "tool_calls" and choice.message.tool_calls
    for call in choice.message.tool_calls:
        assert call.function.name == "get_weather"
        jsonschema.validate(json.loads(call.function.arguments), CITY_SCHEMA)


def test_json_schema_response_format(client):
    response = client.chat.completions.create(
        model=MODEL_NAME,
        max_tokens=40,
        temperature=0,
        messages=[{"role": "user", "content": "Which city is the capital of France? Answer in JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "answer", "schema": CITY_SCHEMA}},
    )
    choice = response.choices[0]
    assert choice.finish_reason == "stop"
    assert set(json.loads(choice.message.content)) == {"city"}


def test_a_new_schema_is_compiled_off_the_servers_event_loop(engine, client):
    schema = {"type": "object", "properties": {uuid.uuid4().hex[:8]: {"type": "integer"}}}
    with grammar_builds(engine) as on_loop:
        client.chat.completions.create(
            model=MODEL_NAME,
            max_tokens=8,
            messages=ASK_WEATHER,
            response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": schema}},
        )
    assert on_loop == [False]


def test_guided_choice_as_extra_body_field(client):
    response = client.completions.create(
        model=MODEL_NAME,
        prompt="Is Paris in France? Answer:",
        max_tokens=5,
        temperature=0,
        extra_body={"guided_choice": [" yes", " no"]},
    )
    assert response.choices[0].text in {" yes", " no"}


def test_invalid_constraint_is_a_400(client):
    with pytest.raises(openai.BadRequestError, match="response_format"):
        client.chat.completions.create(
            model=MODEL_NAME, messages=ASK_WEATHER, response_format={"type": "xml"}
        )


def forced_weather_call(client):
    """get_weather forced, greedy, plain then streamed: the plain turn's one call and the stream's
    tool-call deltas (both turns checked to end in "tool_calls")."""
    kwargs = dict(
        model=MODEL_NAME,
        messages=ASK_WEATHER,
        max_tokens=60,
        temperature=0,
        tools=[WEATHER_TOOL],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    choice = client.chat.completions.create(**kwargs).choices[0]
    assert choice.finish_reason == "tool_calls" and not choice.message.content
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_weather"
    assert set(json.loads(call.function.arguments)) == {"city"}
    chunks = list(client.chat.completions.create(**kwargs, stream=True))
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    return call, [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or []]


def test_forced_tool_call_plain_and_streamed(client):
    call, deltas = forced_weather_call(client)
    assert deltas[0].function.name == "get_weather" and deltas[0].id.startswith("call_")
    assert {d.index for d in deltas} == {0}
    assert "".join(d.function.arguments or "" for d in deltas) == call.function.arguments


def test_auto_tool_choice_shows_the_tools_and_returns_text_or_a_valid_call(engine, client):
    prompt = engine.decode(engine.apply_chat_template(ASK_WEATHER, tools=[WEATHER_TOOL]))
    assert "Current weather of a city." in prompt and "<tool_call>" in prompt
    choice = auto_turn(client, ASK_WEATHER, max_tokens=80)
    assert "<tool_call>" not in (choice.message.content or "")


def test_conversation_with_a_tool_result(client):
    function = {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    call = {"id": "call_1", "type": "function", "function": function}
    messages = [
        *ASK_WEATHER,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny, 24 degrees Celsius."},
    ]
    response = client.chat.completions.create(
        model=MODEL_NAME, messages=messages, tools=[WEATHER_TOOL], max_tokens=30, temperature=0
    )
    assert response.choices[0].message.content
    assert response.choices[0].finish_reason in {"stop", "length"}
