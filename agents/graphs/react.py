"""ReAct: the model picks tools (or final_answer), they run, the model sees their observations.
A turn may hold several calls (the grammar allows parallel calls); all of them run.

START -> agent --(final_answer / budget / loop)--> END
           ^  \\--(tool call)--> tools --/
"""

from __future__ import annotations

import json
import operator
from typing import Annotated

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from agents.chat_model import ToolCall
from agents.graphs import examples
from agents.graphs.common import (
    RunState,
    deps_of,
    emit,
    final_call,
    finish,
    forced_answer,
    llm_turn,
    merge_updates,
    no_answer,
    over_budget,
    repeats,
    run_calls,
    spent,
    stop,
)
from agents.tools import FINAL_ANSWER
from agents.tools.knowledge import UNTRUSTED_NOTE

SYSTEM = (
    "You complete the user's task with tools. Call search to find facts in the documents; when "
    "the task asks for several things, call a tool for each of them in the same turn. "
    "When an observation answers the task, call final_answer with a short answer and the numbers "
    f"of the sources it comes from. {UNTRUSTED_NOTE}"
)


class ReactState(RunState, total=False):
    messages: Annotated[list[dict], operator.add]  # the conversation after the task
    pending: list[dict]  # the tool calls chosen by the last turn


async def agent(state: ReactState, config: RunnableConfig) -> dict:
    deps = deps_of(config)
    messages = [
        {"role": "system", "content": SYSTEM},
        *examples.REACT,
        {"role": "user", "content": state["task"]},
        *state.get("messages", []),
    ]
    if reason := over_budget(state, deps):
        return await spent(state, deps, messages, reason)
    turn, update = await llm_turn(deps, "agent", messages, deps.offered(), parallel=True)
    for c in turn.tool_calls:
        if c.name == FINAL_ANSWER and c.error is None and (why := no_answer(c.arguments, state["task"])):
            c.error = why  # a tool's error is an observation, never the answer: the model is told so
    # NOTE: a final_answer beside other calls was written before their observations: it is dropped.
    calls = [c for c in turn.tool_calls if c.name != FINAL_ANSWER or c.error]
    if not calls and (final := final_call(turn, state["task"])):
        return merge_updates(update, finish({**state, **update}, final))
    if not calls:
        note = "Error: no tool call; call one of the tools or final_answer."
        return {**update, "messages": [{"role": "user", "content": note}], "pending": []}
    fresh = [c for c in _distinct(calls) if repeats(state, c) < deps.budgets.max_repeats]
    if not fresh:
        # Loop guard: the same calls would bring the same observations; the model must answer now.
        call = calls[0]
        guard = emit({"type": "loop_guard", "name": call.name, "arguments": call.arguments})
        forced, answered = await forced_answer({**state, **update}, deps, messages)
        merged = merge_updates(update, guard, forced)
        if answered:
            return merged
        return merge_updates(merged, stop("budget_exhausted", f"loop: {call.name} repeated, no answer given"))
    fresh = fresh[: deps.budgets.max_steps - state.get("usage", {}).get("tool_calls", 0)]
    said = {"role": "assistant", "content": "\n".join(c.as_text() for c in fresh)}
    return {**update, "messages": [said], "pending": [c.as_dict() for c in fresh]}


def _distinct(calls: list[ToolCall]) -> list[ToolCall]:
    """The turn's calls without repeats of one another (same tool and arguments)."""
    seen: dict[str, ToolCall] = {}
    for c in calls:
        seen.setdefault(f"{c.name} {json.dumps(c.arguments, sort_keys=True)}", c)
    return list(seen.values())


async def tools(state: ReactState, config: RunnableConfig) -> dict:
    """Runs every call of the turn (client calls pause the run together) and feeds all their
    observations back as one turn."""
    deps = deps_of(config)
    calls = [ToolCall(**c) for c in state.get("pending", [])]
    observations, update = await run_calls(state, deps, calls)
    return {**update, "messages": [examples.observed(observations)], "pending": []}


def _after_agent(state: ReactState) -> str:
    if state.get("finish_reason"):
        return END
    return "tools" if state.get("pending") else "agent"


def build_graph() -> StateGraph:
    graph = StateGraph(ReactState)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", _after_agent, ["tools", "agent", END])
    graph.add_edge("tools", "agent")
    return graph
