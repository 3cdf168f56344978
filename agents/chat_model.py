"""The agents' chat model: one tool-calling turn over either chat backend.

With the in-process engine every turn is constrained by a grammar built from the offered tools'
JSON Schemas (`tool_choice` "required" or a named function), so the call is valid by construction;
with a remote OpenAI-compatible server the same turn goes through the standard `tools` API.

Small models do not choose to call tools when left to "auto" (measured 0 of 40 with SmolLM2-135M),
so agents never offer "auto": each step is a required choice among the tools, `final_answer`
included. Emitted arguments are still validated against the schema after generation (a remote
server may not constrain; xgrammar's length-limited strings once let control characters through,
which strict `json.loads` refuses).

History stays in plain system/user/assistant messages (calls written as `<tool_call>` text,
observations as user turns) because SmolLM2's template knows no `tool` role.

`tool_format` "python" (setting `agents.tool_call_format`) has the in-process engine's model write a
turn as a Python list of calls instead (inference/grammar/python_calls.py): the tools go into the
system message in that layout, and the history's `<tool_call>` blocks are rewritten into it, so the
graphs and their worked examples keep one layout of their own. A remote server is always asked
through the `tools` API: it writes calls its own way.

With `qa.cascade` (inference/provider.py `Rung`s) a turn whose calls are missing or invalid is
made again by the next model (`turn_weakness`); the turn reports the model whose calls stood and
the escalations, and its usage and time cover every model that tried.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import jsonschema

from inference.chat_template import python_messages
from inference.client import ChatBackend, LocalChatBackend, Usage
from inference.grammar.python_call_parser import parse_python_calls, parse_python_turn
from inference.grammar.spec import ToolFormat, tools_spec
from inference.grammar.tool_parser import new_tool_call_id, parse_tool_calls
from inference.grammar.tools import TOOL_CALL_END, TOOL_CALL_START
from inference.protocol import SamplingParams
from inference.provider import Rung
from inference.tool_relevance import declines_tools
from inference.tracing import GenerationSpan


class TokenLimitReached(Exception):
    """The caller's token rate limit has no room for the next LLM call: the run stops there."""


class Held(Protocol):
    async def settle(self, usage: dict) -> None: ...
    def abandon(self) -> None: ...


class TokenGate(Protocol):
    """Charges each LLM call to whoever pays for the run (api/charging.py AgentTokenGate): reserves
    before the call (TokenLimitReached when there is no room), settled after it."""

    async def reserve(self, prompt_text: str, max_tokens: int) -> Held: ...


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]
    id: str = field(default_factory=new_tool_call_id)
    error: str | None = None  # set when the emitted arguments do not validate

    def as_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "arguments": self.arguments, "error": self.error}

    def as_text(self) -> str:
        """The call as the model writes it, for the history of later turns."""
        body = json.dumps({"name": self.name, "arguments": self.arguments}, ensure_ascii=False)
        return f"{TOOL_CALL_START}\n{body}\n{TOOL_CALL_END}"


@dataclass
class ModelTurn:
    tool_calls: list[ToolCall]
    content: str
    usage: Usage
    finish_reason: str | None
    ms: float
    model: str | None = None  # the model whose calls stood
    escalations: list[dict] = field(default_factory=list)  # {from, reason} per model that failed

    def usage_dict(self) -> dict:
        return {"prompt_tokens": self.usage.prompt_tokens, "completion_tokens": self.usage.completion_tokens}


def function_tool(name: str, description: str, parameters: dict) -> dict:
    """An OpenAI function tool."""
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def validate_call(call: ToolCall, tools: list[dict]) -> ToolCall:
    """Marks `call.error` when it names no offered tool or its arguments break the tool's schema."""
    schemas = {t["function"]["name"]: t["function"].get("parameters") or {} for t in tools}
    if call.name not in schemas:
        call.error = f"unknown tool {call.name!r}; offered: {', '.join(schemas)}"
        return call
    try:
        jsonschema.validate(call.arguments, schemas[call.name])
    except jsonschema.ValidationError as exc:
        call.error = f"invalid arguments for {call.name}: {exc.message}"
    return call


class AgentChatModel:
    """`call(messages, tools, choice)` -> the model's tool calls, usage and timing.

    NOTE: `max_tokens` is a ceiling above what the bounded tool schemas can need (a call cut by it
    is lost); a constrained call ends when its JSON closes, so the ceiling costs nothing.
    """

    def __init__(
        self,
        backend: ChatBackend,
        max_tokens: int = 512,
        temperature: float = 0.0,
        constrained: bool = True,
        cache_salt: str | None = None,
        gate: TokenGate | None = None,
        rungs: list[Rung] | None = None,
        escalated: Callable[[list[dict]], None] | None = None,
        tool_format: ToolFormat = "json",
        tool_relevance: float | None = None,
    ) -> None:
        self.backend, self.max_tokens, self.temperature = backend, max_tokens, temperature
        self.tool_format = tool_format
        # "auto" turns answering a user go without tools under this P(yes) (inference/tool_relevance.py).
        self.tool_relevance = tool_relevance
        self.constrained, self.cache_salt, self.gate = constrained, cache_salt, gate
        self.rungs = rungs or [Rung(backend.model_name, backend)]
        self.escalated = escalated  # told each turn's escalations (the platform's metrics)

    async def call(
        self,
        messages: list[dict],
        tools: list[dict],
        choice: str = "required",
        max_tokens: int | None = None,
        parallel: bool = False,
    ) -> ModelTurn:
        """One turn; `choice` is "required" (any of `tools`), "auto" (calls or a text answer) or the
        name of the one tool to call; `parallel`: the turn may hold several calls."""
        escalations: list[dict] = []
        usage, ms = Usage(), 0.0
        for i, rung in enumerate(self.rungs):
            turn = await self._turn(rung, messages, tools, choice, max_tokens or self.max_tokens, parallel)
            usage, ms = usage + turn.usage, ms + turn.ms
            reason = turn_weakness(turn) if i < len(self.rungs) - 1 else None  # the last one stands
            if reason is None:
                break
            escalations.append({"from": rung.name, "reason": reason})
        if escalations and self.escalated is not None:
            self.escalated(escalations)
        turn.model, turn.escalations, turn.usage, turn.ms = rung.name, escalations, usage, ms
        return turn

    async def _turn(self, rung: Rung, messages, tools, choice, max_tokens: int, parallel: bool) -> ModelTurn:
        start = time.perf_counter()
        if rung.max_tokens is not None:
            max_tokens = min(max_tokens, rung.max_tokens)
        held = None
        if self.gate is not None:
            held = await self.gate.reserve(json.dumps(messages) + json.dumps(tools), max_tokens)
        try:
            turn = (rung.backend, messages, tools, choice, max_tokens, parallel)
            if isinstance(rung.backend, LocalChatBackend):
                calls, content, usage, reason = await self._local(*turn)
            elif hasattr(rung.backend, "tool_turn"):  # a remote server, or replicas behind the router
                calls, content, usage, reason = await self._remote(*turn)
            else:
                raise TypeError(f"unsupported chat backend {type(rung.backend).__name__}")
        except BaseException:
            if held is not None:
                held.abandon()
            raise
        if held is not None:
            await held.settle(usage.as_dict())
        calls = [validate_call(c, tools) for c in calls]
        return ModelTurn(calls, content, usage, reason, (time.perf_counter() - start) * 1000)

    async def _local(self, backend, messages, tools, choice, max_tokens, parallel):
        engine = backend.engine
        python = self.tool_format == "python"
        # A declined turn is a text answer from a model shown no tools (inference/tool_relevance.py).
        declined = choice == "auto" and await declines_tools(
            engine, messages, tools, self.tool_format, self.tool_relevance, self.cache_salt
        )
        spec = None
        if self.constrained and not declined:
            spec = tools_spec(tools, _openai_choice(choice), parallel, self.tool_format)
        params = SamplingParams(
            max_tokens=max_tokens,
            temperature=self.temperature,
            structured_output=spec,
            cache_salt=self.cache_salt,
        )
        if declined:
            prompt = engine.apply_chat_template(messages, add_generation_prompt=True)
        elif python:
            prompt = engine.apply_chat_template(python_messages(messages, tools), add_generation_prompt=True)
        else:
            prompt = engine.apply_chat_template(messages, add_generation_prompt=True, tools=tools)
        if spec is not None:
            await engine.precompile(spec)  # a new tool set compiles off the loop every run shares
        parts: list[str] = []
        usage, reason = Usage(), None
        request_id = uuid.uuid4().hex
        span = GenerationSpan(backend.model_name, params, request_id, "groundwork")
        async for out in engine.generate(request_id, prompt, params):
            parts.append(out.new_text)
            if out.new_token_ids:
                span.token()
            if out.finished:
                usage = Usage(out.num_prompt_tokens, out.num_output_tokens, out.num_cached_tokens)
                reason = out.finish_reason
                span.finish(reason, *usage.counts(), out.scheduled_at)
        if declined:
            return [], "".join(parts), usage, reason
        # NOTE: a constrained turn holds calls only where it starts with "[" ("auto" lets it be text).
        read = (parse_python_turn if self.constrained else parse_python_calls) if python else parse_tool_calls
        parsed = read("".join(parts))
        calls = [_from_openai(c) for c in parsed.tool_calls]
        return calls, parsed.content or "", usage, reason

    async def _remote(self, backend, messages, tools, choice, max_tokens, parallel):
        response = await backend.tool_turn(
            messages, tools, _openai_choice(choice), max_tokens, self.temperature, self.cache_salt, parallel
        )
        choice_ = response.choices[0]
        calls = [_from_openai(c.model_dump()) for c in choice_.message.tool_calls or []]
        u = response.usage
        usage = Usage(u.prompt_tokens, u.completion_tokens) if u else Usage()
        return calls, choice_.message.content or "", usage, choice_.finish_reason


def _openai_choice(choice: str) -> str | dict:
    return choice if choice in ("required", "auto") else {"type": "function", "function": {"name": choice}}


def turn_weakness(turn: ModelTurn) -> str | None:
    """Why the cascade's next model should make this turn instead, or None when it stands."""
    if not turn.tool_calls:
        return "missing_tool_call"
    if any(c.error for c in turn.tool_calls):
        return "invalid_tool_call"
    return None


def _from_openai(call: dict) -> ToolCall:
    function = call.get("function") or {}
    raw = function.get("arguments") or "{}"
    try:
        # NOTE: strict JSON: a raw control character inside a string (xgrammar #800) is an error.
        arguments = json.loads(raw) if isinstance(raw, str) else raw
        error = None if isinstance(arguments, dict) else "arguments are not a JSON object"
    except json.JSONDecodeError as exc:
        arguments, error = {}, f"arguments are not JSON: {exc}"
    return ToolCall(
        function.get("name") or "",
        arguments if isinstance(arguments, dict) else {},
        call.get("id") or new_tool_call_id(),
        error,
    )
