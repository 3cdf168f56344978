"""The claim check of agent runs' answers (agents/runs/grounding.py) and the cascade's use of it
(agents/runs/runner.py `_weakness`)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from agents.runs.events import RunEvents
from agents.runs.grounding import check_answer, claim_step, claims_of
from agents.runs.runner import AgentRunner
from core.settings.qa import QASettings

pytestmark = pytest.mark.unit

SOURCES = {
    "c1": {
        "number": 1,
        "chunk_id": "c1",
        "title": "foo.txt",
        "text": "The Foo report was written by Ada Lane in 2019.",
    },
    "c2": {"number": 2, "chunk_id": "c2", "title": "bar.txt", "text": "The Bar festival started in Linden."},
}
COPIED = "The Foo report was written by Ada Lane in 2019 [1]."
INVENTED = "The Foo report won 3 prizes in Paris."


def test_each_sentence_is_checked_against_the_sources_the_run_gathered():
    claims = asyncio.run(check_answer({"answer": f"{COPIED} {INVENTED}", "sources": SOURCES}))
    assert [c["verdict"] for c in claims] == ["supported", "unsupported"]
    assert claims[0]["citations"] == [1] and claims[0]["evidence"]["chunk_id"] == "c1"
    # a sentence citing a source that does not hold it is checked against that source only
    cited_wrong = asyncio.run(
        check_answer({"answer": "The Bar festival started in Linden [1].", "sources": SOURCES})
    )
    assert cited_wrong[0]["supported"] is False


def test_a_sentence_naming_two_things_rests_on_the_sources_it_cites_together():
    both = "The Foo report was written by Ada Lane in 2019, and the Bar festival started in Linden."
    alone = asyncio.run(check_answer({"answer": both, "sources": SOURCES}))
    assert alone[0]["supported"] is not True and alone[0]["coverage"] < 0.85  # no one span holds it
    named = [{"number": 1}, {"number": 2}]  # the final_answer call's sources
    together = asyncio.run(check_answer({"answer": both, "sources": SOURCES, "citations": named}))
    assert together[0]["supported"] is True and together[0]["coverage"] >= 0.85
    marked = both.removesuffix(".") + " [1, 2]."
    assert asyncio.run(check_answer({"answer": marked, "sources": SOURCES}))[0]["supported"] is True
    invented = (
        "The Foo report was written by Ada Lane in 2020, and the Bar festival started in Linden [1, 2]."
    )
    assert asyncio.run(check_answer({"answer": invented, "sources": SOURCES}))[0]["supported"] is False


def test_nothing_to_check_without_an_answer_or_sources():
    assert asyncio.run(check_answer({"answer": COPIED, "sources": {}})) == []
    assert asyncio.run(check_answer({"answer": None, "sources": SOURCES})) == []
    assert claims_of([{"type": "llm"}]) is None
    first, last = claim_step("a", [{"supported": False}]), claim_step("b", [])
    assert claims_of([first, {"type": "escalation"}, last]) == [] and first["unsupported"] == 1


def weakness(
    trace: list[dict], values: dict, models: list[str], task: str = "What is the Foo report?"
) -> tuple[str | None, list[dict]]:
    """AgentRunner._weakness on a run of `task` with `trace`: the reason, and the trace it left."""
    run = SimpleNamespace(id="r", trace=list(trace), input=task)
    runner = SimpleNamespace(live=RunEvents(), settings=SimpleNamespace(qa=QASettings()))
    return asyncio.run(AgentRunner._weakness(runner, run, values, models)), run.trace


def test_an_unsupported_answer_escalates_unless_the_last_model_wrote_it():
    answered = {"finish_reason": "answered", "answer": f"{COPIED} {INVENTED}", "sources": SOURCES}
    small_turn, large_turn = {"type": "llm", "model": "small"}, {"type": "llm", "model": "large"}
    reason, trace = weakness([small_turn], answered, ["small", "large"])
    assert reason == "unsupported_claims"
    assert (
        trace[-1]["type"] == "claim_check" and trace[-1]["model"] == "small" and trace[-1]["unsupported"] == 1
    )
    # the last model's answer stands (a turn may have escalated to it), and so does a supported one
    assert weakness([small_turn, large_turn], answered, ["small", "large"])[0] is None
    assert weakness([small_turn], {**answered, "answer": COPIED}, ["small", "large"])[0] is None
    assert weakness([small_turn], answered, ["small"])[0] is None  # no cascade: checked, never escalated
    # a try without an answer escalates while a next model is left
    stopped = {"finish_reason": "budget_exhausted"}
    assert weakness([small_turn], stopped, ["small", "large"]) == ("no_answer:budget_exhausted", [small_turn])
    assert weakness([small_turn, {"type": "escalation"}], stopped, ["small", "large"])[0] is None


def test_an_answer_leaving_out_a_thing_the_task_names_escalates():
    task = "What are the Foo report and the Bar festival?"
    answered = {"finish_reason": "answered", "answer": COPIED, "sources": SOURCES}
    small_turn = {"type": "llm", "model": "small"}
    reason, trace = weakness([small_turn], answered, ["small", "large"], task)
    assert reason == "incomplete_answer" and trace[-1]["missing"] == ["Bar"]
    both = f"{COPIED} The Bar festival started in Linden [2]."
    assert weakness([small_turn], {**answered, "answer": both}, ["small", "large"], task)[0] is None
    # recorded on the last model's answer too, which stands
    reason, trace = weakness([small_turn], answered, ["small"], task)
    assert reason is None and trace[-1]["missing"] == ["Bar"]
