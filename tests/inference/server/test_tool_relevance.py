"""`tool_relevance` (`groundwork engine serve --tool-relevance T`): under tool_choice "auto" the model
is first asked whether one of the tools fits the user's request (inference/tool_relevance.py), and a
turn whose P(yes) misses the threshold is answered in text, the model shown no tools."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

from inference.server import create_app
from inference.tool_relevance import tools_fit
from tests.inference.server.conftest import MODEL_NAME, client_for
from tests.inference.server.test_structured import (
    ASK_WEATHER,
    PARIS_WEATHER_GIVEN,
    WEATHER_TOOL,
    forced_weather_call,
)
from tests.support.http import running

pytestmark = pytest.mark.slow


def _server(engine, relevance: float | None) -> Iterator:
    with running(create_app(engine, MODEL_NAME, tool_call_format="python", tool_relevance=relevance)) as url:
        yield client_for(url)


@pytest.fixture(scope="module")
def declining(engine) -> Iterator:
    """Threshold 1: every check short of certainty declines the tools."""
    yield from _server(engine, 1.0)


@pytest.fixture(scope="module")
def asking(engine) -> Iterator:
    """Threshold 0: the model is asked every time, and the tools always stay."""
    yield from _server(engine, 0.0)


@pytest.fixture(scope="module")
def plain(engine) -> Iterator:
    yield from _server(engine, None)


def _auto(client, messages: list[dict]):
    return client.chat.completions.create(
        model=MODEL_NAME,
        messages=messages,
        tools=[WEATHER_TOOL],
        tool_choice="auto",
        max_tokens=16,
        temperature=0,
    )


def test_the_score_is_a_probability_short_of_certainty(engine):
    score = asyncio.run(tools_fit(engine, ASK_WEATHER, [WEATHER_TOOL]))
    # SmolLM2 puts some weight on both answers: the `declining` server's threshold of 1 declines.
    assert 0.0 < score < 1.0


def test_a_declined_turn_is_text_from_a_prompt_without_the_tools(declining, plain):
    declined, offered = _auto(declining, ASK_WEATHER), _auto(plain, ASK_WEATHER)
    choice = declined.choices[0]
    assert not choice.message.tool_calls and choice.finish_reason in ("stop", "length"), choice
    assert choice.message.content
    # The tools prompt (the layout's instructions and the function's JSON) was left out.
    assert declined.usage.prompt_tokens < offered.usage.prompt_tokens - 50


def test_required_calls_and_turns_after_tool_results_are_not_checked(declining, plain):
    call, _ = forced_weather_call(declining)  # asserts the forced turns end in "tool_calls"
    assert call.function.name == "get_weather"
    # Same prompt as a server that never asks: the tools stayed in it.
    kept, offered = _auto(declining, PARIS_WEATHER_GIVEN), _auto(plain, PARIS_WEATHER_GIVEN)
    assert kept.usage.prompt_tokens == offered.usage.prompt_tokens


def test_the_turn_reuses_the_checks_prompt(asking):
    # A question no earlier test cached: only the check can have put its blocks in the prefix cache.
    fresh = [{"role": "user", "content": f"What is the weather like in Lyon ({uuid.uuid4().hex[:8]})?"}]
    usage = _auto(asking, fresh).usage
    assert usage.prompt_tokens_details.cached_tokens >= usage.prompt_tokens - 16  # all but the last block
