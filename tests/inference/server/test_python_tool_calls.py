"""A server started with `tool_call_format="python"` (`groundwork engine serve --tool-call-format
python`): the model writes Python call lists, clients still get OpenAI `tool_calls`."""

from __future__ import annotations

import json
from collections.abc import Iterator

import jsonschema
import pytest

from inference.server import create_app
from tests.inference.server.conftest import MODEL_NAME, client_for
from tests.inference.server.test_structured import (
    CITY_SCHEMA,
    PARIS_WEATHER_GIVEN,
    assert_weather_calls,
    auto_turn,
    forced_weather_call,
    weather_turn,
)
from tests.support.http import running

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(engine) -> Iterator:
    with running(create_app(engine, MODEL_NAME, tool_call_format="python")) as url:
        yield client_for(url)


def test_forced_call_plain_and_streamed(client):
    call, deltas = forced_weather_call(client)
    jsonschema.validate(json.loads(call.function.arguments), CITY_SCHEMA)
    # A call list is read whole (its arguments are Python literals): one delta per call, complete,
    # where the JSON layout streams the name first and the arguments in pieces.
    [delta] = deltas
    assert delta.index == 0 and delta.function.name == "get_weather"
    assert delta.function.arguments == call.function.arguments


def test_a_conversation_with_earlier_calls_and_their_results(client):
    messages = [*PARIS_WEATHER_GIVEN, {"role": "user", "content": "And in Rome?"}]
    assert_weather_calls(weather_turn(client, messages, "required", max_tokens=60).choices[0])


def test_auto_lets_the_model_answer_in_text(client):
    choice = auto_turn(client, [{"role": "user", "content": "Say hello to me in French."}], max_tokens=30)
    # SmolLM2 greets in text here; under "required" the grammar would have forced a call.
    assert not choice.message.tool_calls and not choice.message.content.startswith("["), choice
