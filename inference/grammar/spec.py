"""What a request asks its output to look like, parsed and validated from OpenAI request fields.

Accepted fields (at most one constraint per request):

- `response_format`: `{"type": "text"}`, `{"type": "json_object"}` or
  `{"type": "json_schema", "json_schema": {"name", "schema", "strict"}}` (OpenAI).
- `structured_outputs`: `{"json": schema}`, `{"regex": str}`, `{"grammar": ebnf}`,
  `{"choice": [str, ...]}` or `{"json_object": true}` (vLLM's extra body field).
- `guided_json`, `guided_regex`, `guided_grammar`, `guided_choice`: vLLM's older aliases.
- `tools` + `tool_choice` (+ `parallel_tool_calls`): OpenAI function calling. `tool_choice`
  "none" leaves the output unconstrained; "auto" (the default with tools), "required" and a named
  function constrain it (see `tools.py`).

`strict: true` on a JSON schema or a tool means "never return output that violates the schema":
constraints the grammar cannot enforce are rejected instead of being dropped.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any, Literal

import xgrammar as xgr

from inference.grammar.bounds import check_choices, check_pattern
from inference.grammar.build import build_grammar
from inference.grammar.schemas import check_json_schema, unenforceable_constraints
from inference.grammar.tools import ToolChoice, normalize_tool_choice, normalize_tools
from inference.protocol import InvalidRequestError

Kind = Literal["json_object", "json_schema", "regex", "grammar", "choice", "tools"]
# How a tool call is written: `<tool_call>` JSON blocks (tools.py) or a Python list of calls
# (python_calls.py). Requests get the server's layout (`groundwork engine serve --tool-call-format`,
# "json" by default); the platform's agents choose theirs (`tools_spec`).
ToolFormat = Literal["json", "python"]
_STRUCTURED_OUTPUT_KEYS = ("json", "regex", "grammar", "choice", "json_object")


# NOTE: frozen but unhashable (it holds dicts); `cache_key` is the identity to cache on.
@dataclass(frozen=True)
class StructuredOutputSpec:
    kind: Kind
    json_schema: dict[str, Any] | bool | None = None
    strict: bool = False
    regex: str | None = None
    ebnf: str | None = None
    choices: tuple[str, ...] = ()
    tools: tuple[dict[str, Any], ...] = ()
    tool_choice: ToolChoice = ("auto", None)
    parallel_tool_calls: bool = True
    tool_format: ToolFormat = "json"
    cache_key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "cache_key"}
        # NOTE: no sort_keys: property order is part of the grammar (properties come in schema order).
        digest = hashlib.sha256(json.dumps(values).encode()).hexdigest()
        object.__setattr__(self, "cache_key", digest)

    @property
    def produces_tool_calls(self) -> bool:
        """Whether the output should be read with `tool_parser` (it may hold `<tool_call>` blocks)."""
        return self.kind == "tools"

    @cached_property
    def grammar(self) -> xgr.Grammar:
        """The tokenizer-independent grammar; raises InvalidRequestError if xgrammar rejects it."""
        return build_grammar(self)


def parse_structured_output(
    request: Mapping[str, Any], tool_format: ToolFormat = "json"
) -> StructuredOutputSpec | None:
    """Read the structured-output fields of an OpenAI request body; None if it sets none.
    `tool_format`: the layout the calls of a `tools` request are written in (the server's).

    Raises InvalidRequestError, with the reason, for anything invalid (including schemas and
    grammars xgrammar cannot compile).
    """
    candidates = [
        ("response_format", _from_response_format(request.get("response_format"))),
        *_from_vllm_fields(request),
        ("tools", _from_tools(request, tool_format)),
    ]
    chosen = [(source, spec) for source, spec in candidates if spec is not None]
    if len(chosen) > 1:
        names = ", ".join(source for source, _ in chosen)
        raise InvalidRequestError(f"only one output constraint may be set per request, got: {names}")
    if not chosen:
        return None
    spec = chosen[0][1]
    spec.grammar  # noqa: B018 - builds (and caches) the grammar so that xgrammar errors surface here
    return spec


def tools_spec(
    tools: list[dict], tool_choice: Any, parallel: bool, tool_format: ToolFormat = "json"
) -> StructuredOutputSpec:
    """The constraint of a tool-calling turn in either layout (InvalidRequestError as requests get)."""
    request = {"tools": tools, "tool_choice": tool_choice, "parallel_tool_calls": parallel}
    spec = _from_tools(request, tool_format)
    if spec is None:
        raise InvalidRequestError("tool_choice 'none' asks for no tool call")
    spec.grammar  # noqa: B018 - as parse_structured_output: xgrammar errors surface here
    return spec


def _from_response_format(response_format: Any) -> StructuredOutputSpec | None:
    if response_format is None:
        return None
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return StructuredOutputSpec("json_object")
    if kind != "json_schema":
        raise InvalidRequestError("response_format.type must be 'text', 'json_object' or 'json_schema'")
    body = response_format.get("json_schema")
    if not isinstance(body, dict) or "schema" not in body:
        raise InvalidRequestError("response_format.json_schema must be an object with a 'schema'")
    strict = body.get("strict") or False
    if not isinstance(strict, bool):
        raise InvalidRequestError("response_format.json_schema.strict must be a boolean")
    return _json_schema_spec(body["schema"], "response_format.json_schema.schema", strict)


def _json_schema_spec(schema: Any, where: str, strict: bool) -> StructuredOutputSpec:
    if isinstance(schema, str):  # vLLM accepts the schema as a JSON string too
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as exc:
            raise InvalidRequestError(f"{where} is not valid JSON: {exc}") from exc
    check_json_schema(schema, where)
    if strict and (problems := unenforceable_constraints(schema)):
        raise InvalidRequestError(f"{where} cannot be enforced in strict mode: {'; '.join(problems)}")
    return StructuredOutputSpec("json_schema", json_schema=schema, strict=strict)


def _from_vllm_fields(request: Mapping[str, Any]) -> list[tuple[str, StructuredOutputSpec | None]]:
    values = {f"guided_{k}": request.get(f"guided_{k}") for k in ("json", "regex", "grammar", "choice")}
    structured = request.get("structured_outputs")
    if structured is not None:
        if not isinstance(structured, dict) or set(structured) - set(_STRUCTURED_OUTPUT_KEYS):
            raise InvalidRequestError(
                f"structured_outputs must be an object with keys {_STRUCTURED_OUTPUT_KEYS}"
            )
        values |= {f"structured_outputs.{k}": v for k, v in structured.items()}
    return [(source, _vllm_spec(source, value)) for source, value in values.items() if value is not None]


def _vllm_spec(source: str, value: Any) -> StructuredOutputSpec | None:
    key = source.rsplit(".", 1)[-1].removeprefix("guided_")
    if key == "json":
        return _json_schema_spec(value, source, strict=False)
    if key == "json_object":
        return StructuredOutputSpec("json_object") if value else None
    if key == "choice":
        if not isinstance(value, list) or not value or not all(isinstance(c, str) and c for c in value):
            raise InvalidRequestError(f"{source} must be a non-empty list of non-empty strings")
        check_choices(value, source)
        return StructuredOutputSpec("choice", choices=tuple(value))
    if not isinstance(value, str) or not value:
        raise InvalidRequestError(f"{source} must be a non-empty string")
    check_pattern(value, source)
    return (
        StructuredOutputSpec("regex", regex=value)
        if key == "regex"
        else StructuredOutputSpec("grammar", ebnf=value)
    )


def _from_tools(request: Mapping[str, Any], tool_format: ToolFormat) -> StructuredOutputSpec | None:
    tools, tool_choice = request.get("tools"), request.get("tool_choice")
    if tools is None:
        if tool_choice not in (None, "none"):
            raise InvalidRequestError("tool_choice requires tools")
        return None
    normalized = normalize_tools(tools)
    choice = normalize_tool_choice(tool_choice, [t["name"] for t in normalized])
    if choice is None:
        return None
    parallel = request.get("parallel_tool_calls", True)
    if not isinstance(parallel, bool):
        raise InvalidRequestError("parallel_tool_calls must be a boolean")
    return StructuredOutputSpec(
        "tools", tools=normalized, tool_choice=choice, parallel_tool_calls=parallel, tool_format=tool_format
    )
