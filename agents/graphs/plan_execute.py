"""Plan-and-Execute: a planner writes a short step list, a ReAct sub-graph carries out each step,
a re-planner either answers or writes the steps still needed.

    START -> planner -> review -> executor -> replanner --(final_answer)--> END
                                    ^              |
                                    \\--(replan)----/
"""

from __future__ import annotations

import operator
from typing import Annotated

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from agents.chat_model import function_tool
from agents.graphs import examples, react
from agents.graphs.common import (
    AgentDeps,
    RunState,
    deps_of,
    emit,
    final_call,
    finish,
    forced_answer,
    llm_turn,
    merge_updates,
    over_budget,
    spent,
    stop,
)
from agents.tools import final_answer_tool

PLAN_TOOL, REPLAN_TOOL = "plan", "replan"
MAX_PLAN_STEPS = 3
PLANNER = "Break the task into at most 3 short steps, each a thing to look up or compute."
REPLANNER = (
    "You are given a task, its plan and the results so far. If the results answer the task, call "
    "final_answer with the answer and source numbers; otherwise call replan with the steps still needed."
)

_react = react.build_graph().compile()


class PlanExecuteState(RunState, total=False):
    plan: list[str]
    past_steps: Annotated[list[dict], operator.add]  # {"step", "result"}


def _steps_tool(name: str, description: str) -> dict:
    steps = {
        "type": "array",
        "items": {"type": "string", "minLength": 1, "maxLength": 100},
        "minItems": 1,
        "maxItems": MAX_PLAN_STEPS,
    }
    return function_tool(
        name, description, {"type": "object", "properties": {"steps": steps}, "required": ["steps"]}
    )


def check_plan(steps: list, deps: AgentDeps | None = None) -> list[str]:
    if not isinstance(steps, list) or not steps or not all(isinstance(s, str) and s.strip() for s in steps):
        raise ValueError("a plan is a non-empty list of step descriptions")
    return [s.strip() for s in steps]


async def planner(state: PlanExecuteState, config: RunnableConfig) -> dict:
    deps = deps_of(config)
    messages = [
        {"role": "system", "content": PLANNER},
        *examples.PLANNER,
        {"role": "user", "content": state["task"]},
    ]
    turn, update = await llm_turn(
        deps, "planner", messages, [_steps_tool(PLAN_TOOL, "The steps.")], PLAN_TOOL
    )
    call = next((c for c in turn.tool_calls if c.error is None), None)
    if call is None:
        return merge_updates(update, stop("error", f"the planner wrote no valid plan ({turn.finish_reason})"))
    plan = check_plan(call.arguments["steps"])
    return merge_updates(update, emit({"type": "plan", "plan": plan}), {"plan": plan})


async def review(state: PlanExecuteState, config: RunnableConfig) -> dict:
    """With review_plan, pause so that the caller approves or replaces the plan."""
    if not deps_of(config).review_plan or state.get("finish_reason"):
        return {}
    decision = interrupt({"type": "review_plan", "plan": state["plan"]})
    if decision.get("plan") is None:
        return emit({"type": "plan_approved"})
    plan = check_plan(decision["plan"])
    return {**emit({"type": "plan", "plan": plan, "edited": True}), "plan": plan}


async def executor(state: PlanExecuteState, config: RunnableConfig) -> dict:
    """Runs the plan's first step with the ReAct sub-graph (same budgets, same sources)."""
    deps = deps_of(config)
    if reason := over_budget(state, deps):
        return stop("budget_exhausted", reason)
    step = state["plan"][0]
    usage = state.get("usage", {})
    task = step  # NOTE: the step alone: the small model copies its task into the search query
    out = await _react.ainvoke({"task": task, "usage": usage, "sources": state.get("sources", {})}, config)
    used = {k: v - usage.get(k, 0) for k, v in out.get("usage", {}).items()}
    update = {"steps": out.get("steps", []), "sources": out.get("sources", {}), "usage": used}
    if out.get("finish_reason") not in (None, "answered"):
        return {**update, "finish_reason": out["finish_reason"], "detail": out.get("detail")}
    result = out.get("answer") or "(no result)"
    return {**update, "past_steps": [{"step": step, "result": result}], "plan": state["plan"][1:]}


async def replanner(state: PlanExecuteState, config: RunnableConfig) -> dict:
    deps = deps_of(config)
    done = "\n".join(f"- {p['step']}: {p['result']}" for p in state.get("past_steps", []))
    left = "\n".join(f"- {s}" for s in state.get("plan", [])) or "(none)"
    sources = "\n".join(f"[{s['number']}] {s['title']}" for s in state.get("sources", {}).values())
    content = f"Task: {state['task']}\n\nDone:\n{done}\n\nSteps left:\n{left}\n\nSources:\n{sources}"
    tools = [final_answer_tool(), _steps_tool(REPLAN_TOOL, "The steps still needed.")]
    messages = [
        {"role": "system", "content": REPLANNER},
        *examples.REPLANNER,
        {"role": "user", "content": content},
    ]
    if reason := over_budget(state, deps):
        return await spent(state, deps, messages, reason)
    turn, update = await llm_turn(deps, "replanner", messages, tools)
    if final := final_call(turn, state["task"]):
        return merge_updates(update, finish({**state, **update}, final))
    call = next((c for c in turn.tool_calls if c.name == REPLAN_TOOL), None)
    steps = call.arguments.get("steps") if call is not None else None
    # NOTE: an empty step list breaks the tool's minItems (a server that does not constrain, or a
    # blank step) yet means "nothing left to do": the run finishes with what it has.
    if isinstance(steps, list) and not any(isinstance(s, str) and s.strip() for s in steps):
        return merge_updates(update, await _nothing_left({**state, **update}, deps, messages))
    # NOTE: a plan of steps already done would run them again and come back here (the 1.5B in
    # Python calls re-planned [A, B] after both, until its budget ran out): nothing is left.
    done = {p["step"].strip().lower() for p in state.get("past_steps", [])}
    if call is not None and call.error is None and all(s.strip().lower() in done for s in steps):
        return merge_updates(update, await _nothing_left({**state, **update}, deps, messages))
    if call is None or call.error is not None:
        return {
            **update,
            **stop("error", f"the re-planner gave neither an answer nor a plan ({turn.finish_reason})"),
        }
    plan = check_plan(steps)
    return merge_updates(update, emit({"type": "plan", "plan": plan, "replanned": True}), {"plan": plan})


async def _nothing_left(state: PlanExecuteState, deps: AgentDeps, messages: list[dict]) -> dict:
    """The re-planner wants no more steps but gave no answer: the work is done, so the model answers
    from the results it has (one turn that may only call final_answer); failing that, the run ends
    `plan_done` with the last step's result as its answer."""
    forced, answered = await forced_answer(state, deps, messages)
    if answered:
        return forced
    past = state.get("past_steps", [])
    update = merge_updates(forced, stop("plan_done", "the re-planner left no steps and wrote no answer"))
    return {**update, "answer": past[-1]["result"] if past else None}


def _next(state: PlanExecuteState) -> str:
    return END if state.get("finish_reason") else "executor"


def _after_executor(state: PlanExecuteState) -> str:
    return END if state.get("finish_reason") else "replanner"


def build_graph() -> StateGraph:
    graph = StateGraph(PlanExecuteState)
    graph.add_node("planner", planner)
    graph.add_node("review", review)
    graph.add_node("executor", executor)
    graph.add_node("replanner", replanner)
    graph.add_edge(START, "planner")
    graph.add_edge("planner", "review")
    graph.add_conditional_edges("review", _next, ["executor", END])
    graph.add_conditional_edges("executor", _after_executor, ["replanner", END])
    graph.add_conditional_edges("replanner", _next, ["executor", END])
    return graph
