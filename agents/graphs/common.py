"""What the three graphs share: the run state's common keys, the run's dependencies, one LLM turn,
running tool calls (built-in, client-side, failing), budgets, the loop guard and citations.

Dependencies that cannot be checkpointed (the chat model, the database) travel in
`config["configurable"]["deps"]`; everything a resumed run needs is in the state.
"""

from __future__ import annotations

import asyncio
import json
import operator
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.types import interrupt
from pydantic import BaseModel, Field

from agents.chat_model import AgentChatModel, ModelTurn, ToolCall, validate_call
from agents.graphs import examples
from agents.mcp.pool import McpUnavailable
from agents.mcp.toolbox import UNTRUSTED, McpToolbox
from agents.qa.attribution import content_words
from agents.tools import BUILTIN, FINAL_ANSWER, ToolContext, answer_text, final_answer_tool, not_an_answer
from agents.tools.knowledge import close_quote
from core.tracing import annotate, traced

OBSERVATION_CHARS = 1200


class Budgets(BaseModel):
    max_steps: int = Field(default=6, ge=1, le=50, description="Tool calls the run may make.")
    max_tokens: int = Field(
        default=12_000, ge=100, le=1_000_000, description="LLM prompt + completion tokens."
    )
    max_seconds: float = Field(default=300, gt=0, le=3600, description="Wall-clock time spent running.")
    tool_timeout_s: float = Field(default=60, gt=0, le=600, description="Per tool call.")
    max_repeats: int = Field(
        default=2, ge=1, le=10, description="Identical calls before the loop guard stops."
    )


def _merge(left: dict, right: dict) -> dict:
    return {**left, **right}


def _add_usage(left: dict, right: dict) -> dict:
    keys = set(left) | set(right)
    return {k: left.get(k, 0) + right.get(k, 0) for k in keys}


class RunState(TypedDict, total=False):
    task: str
    steps: Annotated[list[dict], operator.add]  # the trace, in order
    sources: Annotated[dict[str, dict], _merge]  # chunk id -> source with its run-wide number
    usage: Annotated[dict[str, int], _add_usage]  # prompt_tokens, completion_tokens, llm_calls, tool_calls
    answer: str | None
    citations: list[dict]
    finish_reason: str | None  # answered | budget_exhausted | plan_done | cancelled | error
    detail: str | None  # why a run stopped, when not answered


@dataclass
class AgentDeps:
    model: AgentChatModel
    context: ToolContext  # sources are refreshed from the state before each tool call
    tools: list[str]  # enabled built-in tool names
    client_tools: list[dict] = field(default_factory=list)  # OpenAI function tools the caller runs
    budgets: Budgets = field(default_factory=Budgets)
    review_plan: bool = False
    mcp: McpToolbox | None = None  # the tools of the run's MCP servers, listed at segment start
    pace: Callable[[], Awaitable[None]] | None = None  # awaited before each built-in tool call

    @property
    def client_names(self) -> set[str]:
        return {t["function"]["name"] for t in self.client_tools}

    def offered(self, with_final: bool = True) -> list[dict]:
        tools = [BUILTIN[n].openai() for n in self.tools] + self.client_tools
        tools += self.mcp.specs() if self.mcp else []
        return tools + [final_answer_tool()] if with_final else tools

    def parameters(self, name: str) -> dict:
        """The JSON Schema of an offered tool's arguments."""
        return next(t["function"]["parameters"] for t in self.offered() if t["function"]["name"] == name)


def deps_of(config: RunnableConfig) -> AgentDeps:
    return config["configurable"]["deps"]


def emit(*events: dict) -> dict:
    """Send trace events to the live stream and return them as a state update."""
    write = get_stream_writer()
    stamped = [{**e, "at": round(time.time(), 3)} for e in events]
    for event in stamped:
        write(event)
    return {"steps": stamped}


@traced("agent.step")
async def llm_turn(
    deps: AgentDeps,
    node: str,
    messages: list[dict],
    tools: list[dict],
    choice: str = "required",
    parallel: bool = False,
) -> tuple[ModelTurn, dict]:
    """One model call and the state update recording it (trace step and usage); `parallel`: the
    turn may hold several calls."""
    annotate({"groundwork.agent.node": node})
    turn = await deps.model.call(messages, tools, choice, parallel=parallel)
    update = emit(
        {
            "type": "llm",
            "node": node,
            "usage": turn.usage_dict(),
            "ms": round(turn.ms, 1),
            "finish_reason": turn.finish_reason,
            "tool_calls": [c.as_dict() for c in turn.tool_calls],
            "model": turn.model,
            "escalations": turn.escalations,
        }
    )
    update["usage"] = {**turn.usage_dict(), "llm_calls": 1}
    return turn, update


def over_budget(state: RunState, deps: AgentDeps) -> str | None:
    if tokens_spent(state, deps):
        return f"token budget of {deps.budgets.max_tokens} spent"
    if steps_spent(state, deps):
        return f"step budget of {deps.budgets.max_steps} tool calls spent"
    return None


def tokens_spent(state: RunState, deps: AgentDeps) -> bool:
    usage = state.get("usage", {})
    return usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0) >= deps.budgets.max_tokens


def steps_spent(state: RunState, deps: AgentDeps) -> bool:
    """Whether the run's tool calls reached the step budget (LLM turns may still be affordable)."""
    return state.get("usage", {}).get("tool_calls", 0) >= deps.budgets.max_steps


def repeats(state: RunState, call: ToolCall) -> int:
    """How often this exact call (tool and arguments) was already made in the run."""
    key = (call.name, json.dumps(call.arguments, sort_keys=True))
    return sum(
        1
        for s in state.get("steps", [])
        if s["type"] == "tool_call" and (s["name"], json.dumps(s["arguments"], sort_keys=True)) == key
    )


def stop(reason: str, detail: str) -> dict:
    update = emit({"type": "stopped", "finish_reason": reason, "detail": detail})
    return {**update, "finish_reason": reason, "detail": detail}


async def run_calls(state: RunState, deps: AgentDeps, calls: list[ToolCall]) -> tuple[list[str], dict]:
    """Run the calls; each gives an observation (errors included). Calls to client tools pause the
    run (interrupt) until the caller posts their outputs. Returns observations and a state update."""
    # NOTE: calls built from a plan (ReWOO fills one argument) skip the model's validation: a call
    # missing a field its schema requires is an error observation, never sent to the client.
    offered = deps.offered(with_final=False)
    calls = [c if c.error else validate_call(c, offered) for c in calls]
    events: list[dict] = [{"type": "tool_call", **c.as_dict()} for c in calls]
    observations: dict[str, str] = {}
    values: dict[str, object] = {}  # a tool's plain result (calculator's number), for #E references
    client = [c for c in calls if c.name in deps.client_names and c.error is None]
    if client:
        # NOTE: a resumed node runs again from its start; nothing before this line has side effects.
        outputs = interrupt({"type": "requires_action", "tool_calls": [c.as_dict() for c in client]})
        for c in client:
            observations[c.id] = str(outputs.get(c.id, "(no output given)"))
    deps.context.sources = dict(state.get("sources", {}))
    for call in calls:
        if call.id in observations:
            continue
        if deps.pace is not None:
            await deps.pace()
        observations[call.id], values[call.id] = await _run_builtin(deps, call)
    results = [
        {
            "type": "tool_result",
            "id": c.id,
            "name": c.name,
            "output": observations[c.id],
            **({"value": values[c.id]} if values.get(c.id) is not None else {}),
        }
        for c in calls
    ]
    update = emit(*events, *results)
    update["sources"] = deps.context.sources
    update["usage"] = {"tool_calls": len(calls)}
    return [observations[c.id] for c in calls], update


@traced("execute_tool", {"gen_ai.operation.name": "execute_tool"})
async def _run_builtin(deps: AgentDeps, call: ToolCall) -> tuple[str, object]:
    annotate(
        {"gen_ai.tool.name": call.name, "gen_ai.tool.call.id": call.id}, name=f"execute_tool {call.name}"
    )
    if call.error:
        return f"Error: {call.error}", None
    if deps.mcp and call.name in deps.mcp.tools:
        return await _run_mcp(deps, call), None
    if call.name not in deps.tools:
        return f"Error: no tool named {call.name!r}", None
    try:
        async with asyncio.timeout(deps.budgets.tool_timeout_s):
            result = await BUILTIN[call.name].run(deps.context, call.arguments)
    except TimeoutError:
        return f"Error: {call.name} timed out after {deps.budgets.tool_timeout_s:g} s", None
    except Exception as exc:  # a failing tool is an observation the agent can react to
        return f"Error: {call.name} failed: {type(exc).__name__}: {exc}", None
    value = result.data.get("value") if isinstance(result.data, dict) else None
    return _clip(result.text), value


async def _run_mcp(deps: AgentDeps, call: ToolCall) -> str:
    """An MCP tool's result as a numbered, citable source marked untrusted; a dead server is an
    `Error:` observation like any failing tool."""
    try:
        text, outcome = await deps.mcp.call(call.name, call.arguments, deps.budgets.tool_timeout_s)
    except McpUnavailable as exc:
        return f"Error: {exc}"
    text = _clip(text)
    if outcome == "error":
        return f"Error: {call.name} failed ({UNTRUSTED}): {text}"
    tool = deps.mcp.tools[call.name]
    number = deps.context.cite(
        {
            "chunk_id": f"mcp:{call.id}",
            "document_id": None,
            "title": f"{tool.server}.{tool.tool}",
            "source_id": f"mcp://{tool.server}/{tool.tool}",
            "page": None,
            "char_start": 0,
            "char_end": len(text),
            "text": text,
        }
    )
    return f"[{number}] {tool.server}.{tool.tool} ({UNTRUSTED}): {text}"


def finish(state: RunState, call: ToolCall) -> dict:
    """The run's answer from a final_answer call, with citations to the sources it names (or, when
    it names none it has seen, the one its words come from)."""
    answer = examples.without_copied(answer_text(call.arguments), state["task"])
    sources = {s["number"]: s for s in state.get("sources", {}).values()}
    words = content_words(answer)

    def support(number: int) -> int:
        return len(words & content_words(sources[number].get("text", "")))

    # NOTE: a small model picks numbers loosely: of the sources it names, those that share words with
    # the answer are kept when there are any; when it names none it has seen, the best-supported one.
    named = [n for n in dict.fromkeys(call.arguments.get("sources") or []) if n in sources]
    cited = [n for n in named if support(n)] or named
    if not cited and sources:
        best = max(sources, key=support)
        cited = [best] if support(best) else []
    citations = [{k: v for k, v in sources[n].items() if k != "text"} for n in cited]
    update = emit({"type": "answer", "answer": answer, "citations": citations})
    return {**update, "answer": answer, "citations": citations, "finish_reason": "answered"}


def no_answer(arguments: dict, task: str) -> str | None:
    """Why a final_answer call's arguments answer nothing (`not_an_answer`), or only copy a worked
    example's answer instead of answering `task` (copied sentences beside others are dropped: finish)."""
    if why := not_an_answer(arguments):
        return why
    if not examples.without_copied(answer_text(arguments), task):
        return "the answer is the worked example's, not this task's; answer from the observations"
    return None


def final_call(turn: ModelTurn, task: str) -> ToolCall | None:
    """The turn's final_answer call, unless it is invalid or no real answer to `task` (`no_answer`)."""
    calls = [c for c in turn.tool_calls if c.name == FINAL_ANSWER and c.error is None]
    return next((c for c in calls if not no_answer(c.arguments, task)), None)


def _clip(text: str) -> str:
    return text if len(text) <= OBSERVATION_CHARS else close_quote(text[: OBSERVATION_CHARS - 1] + "…")


def merge_updates(*updates: dict) -> dict:
    """Several node updates as one: trace steps concatenated, usage summed, other keys last-wins."""
    out: dict = {}
    for update in updates:
        for key, value in update.items():
            if key == "steps":
                out["steps"] = out.get("steps", []) + value
            elif key == "usage":
                out["usage"] = _add_usage(out.get("usage", {}), value)
            else:
                out[key] = value
    return out


async def spent(state: RunState, deps: AgentDeps, messages: list[dict], reason: str) -> dict:
    """The end of a run whose budget `reason` is spent. NOTE: with only the tool calls spent, not the
    tokens, the observations gathered may hold the answer (a model that fans out searches spends its
    steps before it ever answers): one turn that may only call final_answer comes first."""
    if tokens_spent(state, deps) or not steps_spent(state, deps):
        return stop("budget_exhausted", reason)
    forced, answered = await forced_answer(state, deps, messages)
    return forced if answered else merge_updates(forced, stop("budget_exhausted", reason))


async def forced_answer(state: RunState, deps: AgentDeps, messages: list[dict]) -> tuple[dict, bool]:
    """One turn that may only call final_answer; returns the update and whether it answered."""
    ask = {"role": "user", "content": f"Give the final answer, from the observations, to: {state['task']}"}
    turn, update = await llm_turn(deps, "answer", [*messages, ask], [final_answer_tool()], FINAL_ANSWER)
    if final := final_call(turn, state["task"]):
        return merge_updates(update, finish({**state, **update}, final)), True
    return update, False
