"""ReWOO: plan every tool call up front in one grammar-constrained call, run them, then answer.

    START -> planner -> review -> worker --(steps left)--> worker
                           \\             \\--(done)--> solver -> END
                            \\--(empty plan: no tools)--> solver

The plan is data: `[{"id": "E1", "tool": "search", "input": "..."}, ...]`; a step's input may
mention the evidence of earlier steps as `#E1`, replaced by that step's observation before it runs.
Two LLM calls in all (planner, solver) however many tools run: that is where the tokens are saved.
"""

from __future__ import annotations

import re

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from agents.chat_model import ToolCall, function_tool
from agents.graphs import examples
from agents.graphs.common import (
    AgentDeps,
    RunState,
    deps_of,
    emit,
    final_call,
    finish,
    llm_turn,
    merge_updates,
    over_budget,
    run_calls,
    stop,
)
from agents.tools import BUILTIN, FINAL_ANSWER
from agents.tools.knowledge import UNTRUSTED_NOTE, close_quote

PLAN_TOOL = "plan"
MAX_PLAN_STEPS = 4
EVIDENCE_CHARS = 200
# The solver reads each step's observation up to here: for a search, its top hit and the start of the
# next. Whole observations cost tokens (ReWOO's point) and the small models copied the first one whole.
SOLVER_EVIDENCE_CHARS = 240
_REFERENCE = re.compile(r"#E(\d+)")

PLANNER = (
    "Make a plan for the task: a list of tool calls, each with one input. A later step may use the "
    "result of an earlier one by writing #E1, #E2, ... in its input. Usually: one search per fact."
)
SOLVER = (
    "Answer the task from the evidence: a short sentence for each #E with the number of its source. "
    f"Call final_answer with the answer and those source numbers. {UNTRUSTED_NOTE}"
)


class RewooState(RunState, total=False):
    plan: list[dict]
    evidence: dict[str, str]  # step id -> observation
    values: dict[str, str]  # step id -> what #E<n> stands for: the tool's plain value, else the observation


def plan_tool(deps: AgentDeps) -> dict:
    names = [t["function"]["name"] for t in deps.offered(with_final=False)]
    step = {
        "type": "object",
        "properties": {
            "tool": {"type": "string", "enum": names},
            "input": {"type": "string", "minLength": 1, "maxLength": 100},
        },
        "required": ["tool", "input"],
    }
    steps = {"type": "array", "items": step, "minItems": 1, "maxItems": MAX_PLAN_STEPS}
    return function_tool(
        PLAN_TOOL,
        "The plan: tool calls in order.",
        {"type": "object", "properties": {"steps": steps}, "required": ["steps"]},
    )


def check_plan(steps: list, deps: AgentDeps) -> list[dict]:
    """A plan as stored: numbered steps naming offered tools (ValueError otherwise)."""
    names = sorted(t["function"]["name"] for t in deps.offered(with_final=False))
    plan = []
    for i, step in enumerate(steps, start=1):
        if not isinstance(step, dict) or not str(step.get("input", "")).strip():
            raise ValueError(f"plan step {i} must be {{'tool': one of {names}, 'input': text}}")
        if step.get("tool") not in names:
            raise ValueError(
                f"plan step {i} names {step.get('tool')!r}, not a tool of this run; its tools: {names}"
            )
        plan.append({"id": f"E{i}", "tool": step["tool"], "input": str(step["input"])})
    return plan


async def planner(state: RewooState, config: RunnableConfig) -> dict:
    deps = deps_of(config)
    tools = deps.offered(with_final=False)
    if not tools:  # e.g. its only MCP server did not start: the solver answers from no evidence
        event = {"type": "plan", "plan": [], "note": "no tools to plan with: answered without evidence"}
        return {**emit(event), "plan": [], "evidence": {}, "values": {}}
    listing = "\n".join(f"- {t['function']['name']}: {t['function']['description']}" for t in tools)
    messages = [
        {"role": "system", "content": f"{PLANNER}\nTools:\n{listing}"},
        *examples.REWOO_PLANNER,
        {"role": "user", "content": state["task"]},
    ]
    turn, update = await llm_turn(deps, "planner", messages, [plan_tool(deps)], PLAN_TOOL)
    call = next((c for c in turn.tool_calls if c.error is None), None)
    if call is None:
        return merge_updates(update, stop("error", f"the planner wrote no valid plan ({turn.finish_reason})"))
    kept, dropped = without_copies(call.arguments["steps"], state["task"])
    plan = check_plan(kept, deps)[: deps.budgets.max_steps]
    event = {"type": "plan", "plan": plan, **({"dropped": dropped} if dropped else {})}
    return merge_updates(update, emit(event), {"plan": plan, "evidence": {}, "values": {}})


def without_copies(steps: list[dict], task: str) -> tuple[list[dict], list[dict]]:
    """The planned steps less those copied from the worked examples, and those dropped. NOTE: a small
    planner copies the examples (SmolLM2 planned lookup_customer("Baz river") for a customer's plan).
    A copied step stays when a later step uses its #E, or when no step would be left; the #E
    references of the steps kept are renumbered to match."""
    inputs = [str(s.get("input", "")) for s in steps]
    used = {int(n) for text in inputs for n in _REFERENCE.findall(text)}
    drop = {i for i, text in enumerate(inputs, 1) if examples.copied(text, task) and i not in used}
    if len(drop) == len(steps):
        return steps, []
    numbers = {old: new for new, old in enumerate(sorted(set(range(1, len(steps) + 1)) - drop), 1)}

    def renumber(match: re.Match) -> str:
        return f"#E{numbers.get(int(match.group(1)), match.group(1))}"

    kept = [
        {**s, "input": _REFERENCE.sub(renumber, text)}
        for i, (s, text) in enumerate(zip(steps, inputs, strict=True), 1)
        if i not in drop
    ]
    return kept, [steps[i - 1] for i in sorted(drop)]


async def review(state: RewooState, config: RunnableConfig) -> dict:
    """With review_plan, pause so that the caller approves or replaces the plan."""
    deps = deps_of(config)
    if not deps.review_plan or state.get("finish_reason") or not state["plan"]:
        return {}  # an empty plan (no tools) has nothing to review: a replacement could name none
    decision = interrupt({"type": "review_plan", "plan": state["plan"]})
    if decision.get("plan") is None:
        return emit({"type": "plan_approved"})
    plan = check_plan(decision["plan"], deps)
    return {**emit({"type": "plan", "plan": plan, "edited": True}), "plan": plan}


def _argument_name(deps: AgentDeps, tool: str) -> str:
    """Which argument a plan step's single input fills: the tool's first declared one."""
    schema = BUILTIN[tool].schema() if tool in BUILTIN else deps.parameters(tool)
    return next(iter(schema.get("properties", {})), "input")


async def worker(state: RewooState, config: RunnableConfig) -> dict:
    deps = deps_of(config)
    if reason := over_budget(state, deps):
        return stop("budget_exhausted", reason)
    evidence, values = state.get("evidence", {}), state.get("values", {})
    step = next(s for s in state["plan"] if s["id"] not in evidence)

    def substitute(match: re.Match) -> str:
        return values.get(f"E{match.group(1)}", match.group(0))[:EVIDENCE_CHARS]

    arguments = {_argument_name(deps, step["tool"]): _REFERENCE.sub(substitute, step["input"])}
    call = ToolCall(step["tool"], arguments, id=f"call_{step['id']}")
    [observation], update = await run_calls(state, deps, [call])
    value = update["steps"][-1].get("value", observation)
    return {
        **update,
        "evidence": {**evidence, step["id"]: observation},
        "values": {**values, step["id"]: str(value)},
    }


def _cut(text: str, limit: int) -> str:
    """The text up to `limit` characters, cut at a word. NOTE: no "…" mark: small solvers copy the
    evidence into the answer and took a trailing "…" for its end (Qwen 0.5B: 5 of 12 tasks answered
    both halves with the mark, 8 of 12 without)."""
    return text if len(text) <= limit else close_quote(text[:limit].rsplit(" ", 1)[0])


async def solver(state: RewooState, config: RunnableConfig) -> dict:
    deps = deps_of(config)
    if reason := over_budget(state, deps):
        return stop("budget_exhausted", reason)
    steps = [
        (s["tool"], s["input"], _cut(state["evidence"].get(s["id"], ""), SOLVER_EVIDENCE_CHARS))
        for s in state["plan"]
    ]
    messages = [
        {"role": "system", "content": SOLVER},
        *examples.REWOO_SOLVER,
        {"role": "user", "content": examples.evidence(state["task"], steps)},
    ]
    turn, update = await llm_turn(
        deps,
        "solver",
        messages,
        [t for t in deps.offered() if t["function"]["name"] == FINAL_ANSWER],
        FINAL_ANSWER,
    )
    if final := final_call(turn, state["task"]):
        return merge_updates(update, finish({**state, **update}, final))
    return merge_updates(update, stop("error", f"the solver gave no valid answer ({turn.finish_reason})"))


def _after_review(state: RewooState) -> str:
    if state.get("finish_reason"):
        return END
    return "worker" if state["plan"] else "solver"


def _after_worker(state: RewooState) -> str:
    if state.get("finish_reason"):
        return END
    return "worker" if len(state.get("evidence", {})) < len(state["plan"]) else "solver"


def build_graph() -> StateGraph:
    graph = StateGraph(RewooState)
    graph.add_node("planner", planner)
    graph.add_node("review", review)
    graph.add_node("worker", worker)
    graph.add_node("solver", solver)
    graph.add_edge(START, "planner")
    graph.add_edge("planner", "review")
    graph.add_conditional_edges("review", _after_review, ["worker", "solver", END])
    graph.add_conditional_edges("worker", _after_worker, ["worker", "solver", END])
    graph.add_edge("solver", END)
    return graph
