"""OpenAI `tools` / `tool_choice`: validation and the grammar of a tool call.

SmolLM2-135M's chat template has no tool convention, so a call is written the way the SmolLM
family (SmolLM3's template) and Hermes/Qwen models do:

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

xgrammar's builtin "qwen_3" structural tag emits exactly this layout; `tool_parser` reads it back.
"""

from __future__ import annotations

import re
from typing import Any

import xgrammar as xgr

from inference.grammar.schemas import check_json_schema, drop_unsatisfiable, unenforceable_constraints
from inference.protocol import InvalidRequestError

TOOL_CALL_START = "<tool_call>"
TOOL_CALL_END = "</tool_call>"
_STRUCTURAL_TAG_MODEL = "qwen_3"
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# NOTE: OpenAI lets `parameters` be omitted for a function without arguments.
_NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}

ToolChoice = tuple[str, str | None]  # ("auto" | "required", None) or ("named", function name)


def normalize_tools(tools: Any) -> tuple[dict[str, Any], ...]:
    """Validate OpenAI function tools; return them as {"name", "parameters"} dicts."""
    if not isinstance(tools, list) or not tools:
        raise InvalidRequestError("tools must be a non-empty list")
    normalized: list[dict[str, Any]] = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise InvalidRequestError(f"{where}.type must be 'function'")
        function = tool.get("function")
        if not isinstance(function, dict):
            raise InvalidRequestError(f"{where}.function must be an object")
        name = function.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise InvalidRequestError(f"{where}.function.name must match {_NAME.pattern}")
        if any(t["name"] == name for t in normalized):
            raise InvalidRequestError(f"duplicate tool name {name!r}")
        parameters = function.get("parameters")
        parameters = _NO_PARAMETERS if parameters is None else parameters
        check_json_schema(parameters, f"{where}.function.parameters")
        if not isinstance(parameters, dict) or parameters.get("type") != "object":
            raise InvalidRequestError(f"{where}.function.parameters must be a schema of type 'object'")
        strict = function.get("strict")
        if strict is not None and not isinstance(strict, bool):
            raise InvalidRequestError(f"{where}.function.strict must be a boolean")
        if strict and (problems := unenforceable_constraints(parameters)):
            raise InvalidRequestError(
                f"{where}.function.parameters cannot be enforced: {'; '.join(problems)}"
            )
        parameters = drop_unsatisfiable(parameters, f"{where}.function.parameters")
        normalized.append({"name": name, "parameters": parameters})
    return tuple(normalized)


def normalize_tool_choice(tool_choice: Any, tool_names: list[str]) -> ToolChoice | None:
    """Map OpenAI `tool_choice` to ("auto"|"required"|"named", name); None means "none"."""
    if tool_choice is None:
        return ("auto", None)
    if tool_choice == "none":
        return None
    if tool_choice in ("auto", "required"):
        return (tool_choice, None)
    if isinstance(tool_choice, dict) and tool_choice.get("type") == "function":
        name = (tool_choice.get("function") or {}).get("name")
        if name not in tool_names:
            raise InvalidRequestError(f"tool_choice names function {name!r}, which is not in tools")
        return ("named", name)
    raise InvalidRequestError(
        "tool_choice must be 'none', 'auto', 'required' or {'type': 'function', 'function': {'name': ...}}"
    )


def tool_call_structural_tag(
    tools: tuple[dict[str, Any], ...], choice: ToolChoice, parallel: bool, max_whitespace: int
) -> xgr.StructuralTag:
    """The structural tag: free text and/or `<tool_call>` blocks, as `choice` allows."""
    mode, name = choice
    openai_tools = [
        # NOTE: strict is left unset on purpose: xgrammar leaves strict=False tools unconstrained,
        # and we always constrain arguments to the declared parameters.
        {"type": "function", "function": {"name": t["name"], "parameters": t["parameters"]}}
        for t in tools
    ]
    xgr_choice: Any = {"type": "function", "function": {"name": name}} if mode == "named" else mode
    return xgr.get_model_structural_tag(
        _STRUCTURAL_TAG_MODEL,
        tools=openai_tools,
        tool_choice=xgr_choice,
        reasoning="disabled",
        parallel_tool_calls=parallel,
        max_whitespace_cnt=max_whitespace,
    )
