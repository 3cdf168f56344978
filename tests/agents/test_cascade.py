"""The cascade's checks (agents/qa/cascade.py) on answers as the pipeline builds them, its settings,
and the provider's engine per cascade model (the packaged SmolLM2 under a second spec: its path)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agents.chat_model import ModelTurn, ToolCall, turn_weakness
from agents.qa.attempts import Answer
from agents.qa.cascade import weakness
from agents.runs.escalation import answered_by, escalation_step, level, run_usage
from core.registry import resolve_model
from core.settings.qa import QASettings
from inference.client import LocalChatBackend, Usage
from inference.provider import LLMProvider

QA = QASettings()


def answer(text: str, mode: str = "generate", finish: str = "stop", score: float | None = None) -> Answer:
    return Answer(text, [], [], Usage(), finish, mode, quote_score=score)


def claim(supported: bool | None) -> dict:
    return {"supported": supported}


def test_weak_answers_and_why():
    assert weakness(answer("Zephyr 4.2 was", finish="length"), None, 0.9, QA) == "truncated"
    refusal = answer("The documents do not contain the release date.")
    assert weakness(refusal, None, 0.9, QA) == "refusal"
    # Weak sources: refusing is right (the no-answer gate's threshold is lower still).
    assert weakness(refusal, None, QA.cascade_strong_sources - 0.01, QA) is None
    written = answer("It was released in March [1]. It adds a sensor [1].")
    assert weakness(written, [claim(True), claim(False)], 0.9, QA) == "unsupported_claims"
    assert weakness(written, [claim(True), claim(None)], 0.9, QA) is None  # unknown is not unsupported
    half = QA.model_copy(update={"cascade_max_unsupported": 0.5})
    assert weakness(written, [claim(True), claim(False)], 0.9, half) is None
    low = answer("Owls fly silently. [1]", "quote", score=QA.cascade_min_quote_score - 0.01)
    assert weakness(low, [claim(True)], 0.9, QA) == "low_quote_score"
    assert weakness(answer("Owls fly silently. [1]", "quote", score=0.7), [claim(True)], 0.9, QA) is None
    # a question about two things answered about one (a quote would be the same from the next model)
    two = "When were the Zephyr and the Orca released?"
    one = answer("The Zephyr was released in March [1].")
    assert weakness(one, [claim(True)], 0.9, QA, question=two) == "incomplete_answer"
    both = answer("The Zephyr was released in March [1], the Orca in May [2].")
    assert weakness(both, [claim(True)], 0.9, QA, question=two) is None
    quoted = answer("The Zephyr was released in March. [1]", "quote", score=0.7)
    assert weakness(quoted, [claim(True)], 0.9, QA, question=two) is None


def test_agent_turns_without_a_valid_call_are_weak():
    def turn(*calls: ToolCall) -> ModelTurn:
        return ModelTurn(list(calls), "", Usage(), "stop", 1.0)

    assert turn_weakness(turn()) == "missing_tool_call"
    assert turn_weakness(turn(ToolCall("search", {}, error="invalid arguments"))) == "invalid_tool_call"
    assert turn_weakness(turn(ToolCall("search", {"query": "owls"}))) is None


def test_a_runs_model_usage_and_escalations_cover_every_try():
    weak_turn = {
        "type": "llm",
        "node": "agent",
        "model": "big",
        "escalations": [{"from": "small", "reason": "x"}],
    }
    first_try = {"finish_reason": "plan_done", "usage": {"prompt_tokens": 10, "tool_calls": 1}}
    trace = [
        weak_turn,
        escalation_step("small", first_try, "no_answer:plan_done"),
        {"type": "llm", "node": "agent", "model": "big"},
    ]
    assert level(trace) == 1
    assert run_usage({"prompt_tokens": 5, "tool_calls": 2}, trace) == {"prompt_tokens": 15, "tool_calls": 3}
    assert answered_by(trace) == {
        "model": "big",
        "escalations": [
            {"from": "small", "reason": "x", "node": "agent"},
            {"from": "small", "reason": "no_answer:plan_done", "node": None},
        ],
    }
    assert answered_by([]) == {"model": None, "escalations": []}


def test_cascade_settings_parse_names_and_refuse_a_model_twice():
    qa = QASettings.model_validate({"cascade": ["small", {"model": "large", "url": "http://h:8000/v1"}]})
    assert [(m.model, m.url) for m in qa.cascade] == [("small", None), ("large", "http://h:8000/v1")]
    with pytest.raises(ValidationError, match="names a model twice"):
        QASettings.model_validate({"cascade": ["small", {"model": "small", "url": "http://h/v1"}]})


@pytest.mark.slow
def test_each_cascade_model_gets_one_engine_started_once_and_shut_down(settings):
    path = str(resolve_model(settings.llm_model).path)
    qa = QASettings.model_validate({"cascade": [settings.llm_model, path]})
    provider = LLMProvider(settings.model_copy(update={"qa": qa}))
    first = provider.cascade()
    assert [r.name for r in first] == [settings.llm_model, path]
    assert all(isinstance(r.backend, LocalChatBackend) for r in first)
    default, other = (r.backend.engine for r in first)
    assert default is provider.engine and other is not default  # the default is the provider's own
    salted = provider.cascade("tenant")[1].backend.engine
    assert salted.salt == "tenant" and salted._engine is other  # the same engine, its requests salted
    provider.shutdown()
    assert provider.engine is None and other._thread is None
