"""The agents' chat model on the packaged SmolLM2: grammar-constrained calls from the in-process
engine always validate; a remote OpenAI-compatible server gets the standard tools API."""

from __future__ import annotations

import asyncio
import uuid

import jsonschema
import pytest
from langgraph.checkpoint.memory import InMemorySaver

from agents.chat_model import AgentChatModel, ToolCall, _from_openai, validate_call
from agents.graphs import BUILDERS
from agents.graphs.common import AgentDeps
from agents.tools import BUILTIN, FINAL_ANSWER, ToolContext, final_answer_tool
from inference.chat_template import python_messages
from inference.client import LocalChatBackend, RemoteChatBackend
from inference.grammar.spec import parse_structured_output
from inference.protocol import SamplingParams
from inference.provider import start_local_engine
from inference.server import create_app as create_engine_app
from tests.support.grammar import grammar_builds
from tests.support.http import running

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]  # the CI box is shared

BOOKING = {
    "type": "function",
    "function": {
        "name": "book_table",
        "description": "Book a restaurant table.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "enum": ["Paris", "Oslo", "Lima"]},
                "guests": {"type": "integer", "minimum": 1, "maximum": 12},
                "notes": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 2},
            },
            "required": ["city", "guests"],
        },
    },
}
TOOLS = [BOOKING, BUILTIN["search"].openai(), BUILTIN["calculator"].openai(), final_answer_tool()]
PROMPTS = ["Book a table for 4 people in Oslo, by the window.", "What is 17 times 23?"]


@pytest.fixture(scope="module")
def engine(settings):
    engine = start_local_engine(settings)
    yield engine
    engine.shutdown()


@pytest.mark.parametrize("tool_format", ["json", "python"])
def test_every_constrained_call_validates_against_its_schema(engine, tool_format):
    model = AgentChatModel(LocalChatBackend(engine), tool_format=tool_format)
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    for prompt in PROMPTS:
        for choice in ("required", "book_table"):
            turn = asyncio.run(model.call([{"role": "user", "content": prompt}], TOOLS, choice))
            assert len(turn.tool_calls) == 1, (prompt, choice, turn)
            call = turn.tool_calls[0]
            assert call.error is None and (choice == "required" or call.name == choice), call
            jsonschema.validate(call.arguments, schemas[call.name])
            assert turn.usage.prompt_tokens > 0 and turn.usage.completion_tokens > 0


@pytest.mark.parametrize("tool_format", ["json", "python"])
def test_an_auto_turn_is_valid_calls_or_text(engine, tool_format):
    model = AgentChatModel(LocalChatBackend(engine), tool_format=tool_format, max_tokens=40)
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    for prompt in [*PROMPTS, "Say hello in French."]:
        turn = asyncio.run(model.call([{"role": "user", "content": prompt}], TOOLS, "auto", parallel=True))
        for call in turn.tool_calls:
            assert call.error is None, call
            jsonschema.validate(call.arguments, schemas[call.name])
        assert turn.tool_calls or (turn.content and not turn.content.startswith("[")), turn


@pytest.mark.parametrize("tool_format", ["json", "python"])
def test_a_turn_the_relevance_check_declines_is_text_without_the_tools(engine, tool_format):
    # Threshold 1: SmolLM2's P(yes) falls short of it (tests/inference/server/test_tool_relevance.py).
    backend = LocalChatBackend(engine)
    asked = AgentChatModel(backend, tool_format=tool_format, max_tokens=40, tool_relevance=1.0)
    offered = AgentChatModel(backend, tool_format=tool_format, max_tokens=40)
    messages = [{"role": "user", "content": PROMPTS[0]}]
    declined = asyncio.run(asked.call(messages, TOOLS, "auto"))
    assert not declined.tool_calls and declined.content, declined
    plain = asyncio.run(offered.call(messages, TOOLS, "auto"))
    assert declined.usage.prompt_tokens < plain.usage.prompt_tokens - 100  # no tools prompt
    required = asyncio.run(asked.call(messages, TOOLS, "required"))  # not checked: a call comes
    assert len(required.tool_calls) == 1 and required.tool_calls[0].error is None, required


def test_new_grammars_are_built_off_the_event_loop(engine):
    # Names no earlier test compiled: each turn builds its grammar here.
    tool = {**BOOKING, "function": {**BOOKING["function"], "name": f"book_{uuid.uuid4().hex[:8]}"}}
    schema = {"type": "object", "properties": {uuid.uuid4().hex[:8]: {"type": "integer"}}}
    constrained = SamplingParams(
        max_tokens=8, structured_output=parse_structured_output({"guided_json": schema})
    )
    messages = [{"role": "user", "content": PROMPTS[0]}]
    backend = LocalChatBackend(engine)

    async def turns() -> None:
        await AgentChatModel(backend, max_tokens=20).call(messages, [tool], "required")
        async for _ in backend.stream_chat(messages, constrained):  # the QA attempts' and checks' path
            pass

    with grammar_builds(engine) as on_loop:
        asyncio.run(turns())
    assert on_loop == [False, False]


def test_python_layout_shows_history_calls_in_its_own_layout():
    said = [
        ToolCall("search", {"query": "Foo"}),
        ToolCall(FINAL_ANSWER, {"answer": "A [1].", "sources": [1]}),
    ]
    history = [
        {"role": "user", "content": "Who?"},
        {"role": "assistant", "content": "\n".join(c.as_text() for c in said)},
    ]
    system, user, assistant = python_messages(history, [BUILTIN["search"].openai()])
    assert system["role"] == "system" and "search" in system["content"] and user == history[0]
    assert assistant["content"] == '[search(query="Foo"), final_answer(answer="A [1].", sources=[1])]'


def test_validation_catches_what_an_unconstrained_server_may_send():
    bad = validate_call(ToolCall("book_table", {"city": "Rome", "guests": 2}), [BOOKING])
    assert "invalid arguments" in bad.error
    raw_tab = {"function": {"name": "search", "arguments": '{"query": "a\tb"}'}}  # xgrammar #800
    assert "not JSON" in _from_openai(raw_tab).error
    assert "unknown tool" in validate_call(ToolCall("rm", {}), [BOOKING]).error


def test_remote_server_gets_the_openai_tools_api(engine, settings):
    with running(create_engine_app(engine, settings.llm_model)) as url:
        model = AgentChatModel(RemoteChatBackend(f"{url}/v1", settings.llm_model))
        turn = asyncio.run(model.call([{"role": "user", "content": PROMPTS[0]}], [BOOKING], "book_table"))
    [call] = turn.tool_calls
    assert call.name == "book_table" and call.error is None
    jsonschema.validate(call.arguments, BOOKING["function"]["parameters"])
    assert turn.usage.prompt_tokens > 0


# In Python calls SmolLM2 makes one call of the two in its first turn.
@pytest.mark.parametrize(("tool_format", "first_calls"), [("json", 2), ("python", 1)])
def test_react_turn_of_two_calls_end_to_end(engine, tool_format, first_calls):
    # Two things asked: with the two-call worked example SmolLM2 makes both calls in one turn. Its
    # searches fail here (no database in the context): errors are observations, never the answer.
    model = AgentChatModel(LocalChatBackend(engine), tool_format=tool_format)
    context = ToolContext(None, None, uuid.uuid4(), [], None)
    deps = AgentDeps(model, context, ["search", "calculator"])
    graph = BUILDERS["react"]().compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "parallel", "deps": deps}}
    task = "What is 17 times 23, and what is 6 plus 9?"
    out = asyncio.run(graph.ainvoke({"task": task, "usage": {}}, config))
    turns = [s for s in out["steps"] if s["type"] == "llm" and s["node"] == "agent"]
    assert len(turns[0]["tool_calls"]) >= first_calls, turns[0]
    assert all(c["error"] is None for c in turns[0]["tool_calls"]), turns[0]
    results = [s for s in out["steps"] if s["type"] == "tool_result"]
    assert len(results) == out["usage"]["tool_calls"] >= first_calls
    assert out["finish_reason"] in ("answered", "budget_exhausted"), out.get("detail")
    assert not (out.get("answer") or "").startswith("Error:")
