"""ReAct: the model picks a tool (or final_answer), the tool runs, the model sees the observation.

START -> agent --(final_answer / budget / loop)--> END
           ^  \\--(tool call)--> tools --/
"""

from __future__ import annotations

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
    over_budget,
    repeats,
    run_calls,
    stop,
)
from agents.tools.knowledge import UNTRUSTED_NOTE

SYSTEM = (
    "You complete the user's task with tools. Call search to find facts in the documents. "
    "When an observation answers the task, call final_answer with a short answer and the numbers "
    f"of the sources it comes from. {UNTRUSTED_NOTE}"
)


class ReactState(RunState, total=False):
    messages: Annotated[list[dict], operator.add]  # the conversation after the task
    pending: list[dict]  # the tool calls chosen by the last turn


async def agent(state: ReactState, config: RunnableConfig) -> dict:
    deps = deps_of(config)
    if reason := over_budget(state, deps):
        return stop("budget_exhausted", reason)
    messages = [
        {"role": "system", "content": SYSTEM},
        *examples.REACT,
        {"role": "user", "content": state["task"]},
        *state.get("messages", []),
    ]
    turn, update = await llm_turn(deps, "agent", messages, deps.offered())
    if final := final_call(turn):
        return merge_updates(update, finish({**state, **update}, final))
    if not turn.tool_calls:
        note = "Error: no tool call; call one of the tools or final_answer."
        return {**update, "messages": [{"role": "user", "content": note}], "pending": []}
    call = turn.tool_calls[0]
    if repeats(state, call) >= deps.budgets.max_repeats:
        # Loop guard: the same call would bring the same observation; the model must answer now.
        guard = emit({"type": "loop_guard", "name": call.name, "arguments": call.arguments})
        forced, answered = await forced_answer({**state, **update}, deps, messages)
        merged = merge_updates(update, guard, forced)
        if answered:
            return merged
        return merge_updates(merged, stop("budget_exhausted", f"loop: {call.name} repeated, no answer given"))
    said = {"role": "assistant", "content": call.as_text()}
    return {**update, "messages": [said], "pending": [call.as_dict()]}


async def tools(state: ReactState, config: RunnableConfig) -> dict:
    deps = deps_of(config)
    calls = [ToolCall(**c) for c in state.get("pending", [])]
    observations, update = await run_calls(state, deps, calls)
    hint = "\nIf this answers the task, call final_answer."
    notes = [{"role": "user", "content": f"Observation: {o}{hint}"} for o in observations]
    return {**update, "messages": notes, "pending": []}


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
