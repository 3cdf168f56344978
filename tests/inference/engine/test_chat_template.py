"""Tools reach the prompt: rendered by templates that know them, described in a system message otherwise."""

from __future__ import annotations

import json

import pytest

from inference.chat_template import python_messages, render_chat
from tests.inference.engine.tiny import make_tokenizer

pytestmark = pytest.mark.unit

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ASK = [{"role": "user", "content": "Weather in Paris?"}]
# A template with its own tool convention, as Qwen or SmolLM3 templates have.
TOOLS_AWARE_TEMPLATE = (
    "{% if tools %}<|im_start|>system\nTOOLS:{% for t in tools %} {{ t['function']['name'] }}{% endfor %}"
    "<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def tokenizer():
    return make_tokenizer()


def test_without_tools_the_template_renders_as_is(tokenizer):
    expected = "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"
    assert render_chat(tokenizer, ASK) == expected


def test_tools_ignored_by_the_template_become_a_system_message(tokenizer):
    text = render_chat(tokenizer, ASK, [WEATHER_TOOL])
    assert text.startswith("<|im_start|>system\n")
    assert json.dumps(WEATHER_TOOL["function"]) in text
    assert '<tool_call>\n{"name": "<function-name>", "arguments": ' in text
    assert text.endswith("<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n")


def test_tools_are_merged_into_an_existing_system_message(tokenizer):
    messages = [{"role": "system", "content": "Be brief."}, *ASK]
    text = render_chat(tokenizer, messages, [WEATHER_TOOL])
    assert text.count("<|im_start|>system") == 1
    assert text.startswith("<|im_start|>system\nBe brief.\n\nYou may call")
    assert messages[0]["content"] == "Be brief."  # the caller's messages are left alone


def test_a_template_that_renders_tools_is_trusted():
    tokenizer = make_tokenizer()
    tokenizer.chat_template = TOOLS_AWARE_TEMPLATE
    text = render_chat(tokenizer, ASK, [WEATHER_TOOL])
    assert text.startswith("<|im_start|>system\nTOOLS: get_weather<|im_end|>\n")
    assert "<tool_call>" not in text


def test_python_layout_writes_earlier_calls_as_call_lists():
    oslo = {"name": "get_weather", "arguments": '{"city": "Oslo"}'}
    call = {"id": "c1", "type": "function", "function": oslo}
    blocks = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome"}}\n</tool_call>'
    history = [
        {"role": "system", "content": "Be brief."},
        *ASK,
        {"role": "assistant", "content": "Checking.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "Rain."},
        {"role": "assistant", "content": blocks},  # as the platform's agents keep their turns
        {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "x", "arguments": "{"}}]},
    ]
    system, ask, checked, result, kept, unreadable = python_messages(history, [WEATHER_TOOL])
    assert system["content"].startswith("Be brief.\n\n") and '"name": "get_weather"' in system["content"]
    assert "[func_name1(" in system["content"] and ask == ASK[0] and result == history[3]
    assert checked == {"role": "assistant", "content": 'Checking.\n[get_weather(city="Oslo")]'}
    assert kept["content"] == '[get_weather(city="Rome")]'
    assert unreadable == history[5]  # arguments that are not JSON: left for the template as they are
