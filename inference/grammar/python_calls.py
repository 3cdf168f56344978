"""Tool calls in Python call syntax: `[get_weather(city="Paris"), get_time(zone="CET", utc=True)]`.

Why a second layout beside the `<tool_call>` JSON blocks of `tools.py`: it is the one BFCL's
prompt mode asks for, so the one behind the published prompt-mode figures of the Qwen2.5 models,
and the models write it more faithfully (bfcl-dev with Qwen2.5-Coder-1.5B: see
benchmarks/results/agents.*.json, `--tool-format`). A turn in this layout is one Python list of
calls with keyword arguments, written as the whole answer (or, under tool_choice "auto", text that
does not start with "[").

The grammar is EBNF built from the tools' JSON Schemas: the function names offered, keyword
arguments in the schema's property order (required ones always there, optional ones skippable),
and Python literals whose types, enums and nested object keys follow each argument's schema.
Strings are double-quoted and hold no '"', '\\' or control characters, as the JSON grammars'
length-limited strings (build.py: one character class keeps xgrammar's mask cache working).
String lengths, item counts and small integer ranges are spelled out; other constraints (patterns,
wide ranges, formats) are checked after generation,
as every tool call is (agents/chat_model.py `validate_call`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from inference.grammar.tools import ToolChoice

_BASE_RULES = r"""
py_sep ::= "," " "?
py_str ::= "\"" [^\0-\x1f\"\\]* "\""
py_int ::= "-"? ("0" | [1-9] [0-9]*)
py_num ::= py_int ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
py_bool ::= "True" | "False"
py_none ::= "None"
py_any ::= py_str | py_num | py_bool | py_none | py_list | py_dict
py_list ::= "[" (py_any (py_sep py_any)*)? "]"
py_dict ::= "{" (py_str ":" " "? py_any (py_sep py_str ":" " "? py_any)*)? "}"
py_prose ::= [^\0\t\n\r \[] [^\0]*
"""
_STRING_CHAR = r"[^\0-\x1f\"\\]"
_SCALARS = {
    "string": "py_str",
    "integer": "py_int",
    "number": "py_num",
    "boolean": "py_bool",
    "null": "py_none",
}


def python_literal(value: Any) -> str:
    """`value` (JSON data) as a Python literal, strings double-quoted."""
    if isinstance(value, bool) or value is None:
        return {True: "True", False: "False", None: "None"}[value]
    if isinstance(value, list):
        return "[" + ", ".join(map(python_literal, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {python_literal(v)}" for k, v in value.items()) + "}"
    return json.dumps(value, ensure_ascii=False)


def calls_text(calls: Iterable[tuple[str, dict]]) -> str:
    """(name, arguments) calls as the model writes them in this layout."""
    written = (
        f"{name}({', '.join(f'{k}={python_literal(v)}' for k, v in args.items())})" for name, args in calls
    )
    return "[" + ", ".join(written) + "]"


def python_tools_prompt(tools: list[dict]) -> str:
    """The system text that shows OpenAI function `tools` and this layout to the model.

    NOTE: worded after BFCL's prompt mode, on bfcl-dev: with a shorter text whose example showed
    quoted values, Qwen2.5-Coder-1.5B wrote its unconstrained calls as a list of strings. Telling it
    to leave optional parameters out and to make one call per item made it worse (30 of 64 first
    cases right against 33; benchmarks/results/agents.qwen2.5-coder-1.5b.optional-args-prompt.json).
    """
    functions = json.dumps([t["function"] for t in tools], indent=4, ensure_ascii=False)
    return (
        "You are an expert at composing function calls. You are given a question and a set of "
        "functions. Based on the question, make one or more function calls to achieve its purpose. "
        "If none of the functions can be used, say so. Return only the function calls.\n\n"
        "Write the calls in this format: [func_name1(param_name1=param_value1, "
        "param_name2=param_value2), func_name2(param_name=param_value)]. Do not add any other text.\n\n"
        f"The functions you can call, in JSON:\n{functions}"
    )


def python_calls_ebnf(tools: tuple[dict[str, Any], ...], choice: ToolChoice, parallel: bool) -> str:
    """The grammar of one turn of calls to `tools` (normalized, tools.py) as `choice` allows.

    With "auto" the turn is either a call list or text that does not start with "[" or with
    whitespace (so that what follows is never read as calls: `python_call_parser` takes calls only
    at the start of a constrained turn).
    """
    mode, name = choice
    rules = _Rules()
    offered = [t for t in tools if mode != "named" or t["name"] == name]
    calls = [
        rules.add(f'{json.dumps(t["name"] + "(")} {rules.keyed(t["parameters"], keyword=True)} ")"')
        for t in offered
    ]
    call = rules.add(" | ".join(calls))
    more = f" (py_sep {call})*" if parallel else ""
    prose = " | py_prose" if mode == "auto" else ""
    return f'root ::= "[" {call}{more} "]"{prose}\n' + "\n".join(rules.lines) + _BASE_RULES


def _repeat(expr: str, low: int, high: int | None) -> str:
    return f"{expr}{{{low},{'' if high is None else high}}}"


def _small_range(schema: dict) -> bool:
    """An integer range spelled out value by value (the agents' source numbers, 1-99)."""
    low, high = schema.get("minimum"), schema.get("maximum")
    return isinstance(low, int) and isinstance(high, int) and 0 <= high - low < 256


class _Rules:
    """Named EBNF rules made while walking schemas (memoized: one rule per distinct schema)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._made: dict[str, str] = {}

    def add(self, body: str) -> str:
        if body not in self._made:
            self._made[body] = f"py_r{len(self._made)}"
            self.lines.append(f"{self._made[body]} ::= {body}")
        return self._made[body]

    def value(self, schema: Any) -> str:
        if not isinstance(schema, dict):
            return "py_any"
        if "const" in schema:
            return json.dumps(python_literal(schema["const"]))
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return self.add(" | ".join(json.dumps(python_literal(v)) for v in schema["enum"]))
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list) and schema[key]:
                return self.add(" | ".join(self.value({**schema, **s, key: None}) for s in schema[key]))
        kind = schema.get("type")
        if isinstance(kind, list):
            return self.add(" | ".join(self.value({**schema, "type": k}) for k in kind) or "py_any")
        if kind == "array":
            item = self.value(schema.get("items"))
            low, high = schema.get("minItems", 0), schema.get("maxItems")
            more = _repeat(f"(py_sep {item})", max(0, low - 1), None if high is None else high - 1)
            listed = f'"[" {item} {more} "]"'
            return self.add(listed if low > 0 else f'"[" "]" | {listed}' if high != 0 else '"[" "]"')
        if kind == "string" and ("minLength" in schema or "maxLength" in schema):
            chars = _repeat(_STRING_CHAR, schema.get("minLength", 0), schema.get("maxLength"))
            return self.add(f'"\\"" {chars} "\\""')
        if kind == "integer" and _small_range(schema):
            return self.add(" | ".join(f'"{n}"' for n in range(schema["minimum"], schema["maximum"] + 1)))
        if kind == "object" and isinstance(schema.get("properties"), dict) and schema["properties"]:
            return self.add(f'"{{" {self.keyed(schema, keyword=False)} "}}"')
        if kind == "object":
            return "py_dict"
        return _SCALARS.get(kind, "py_any")

    def keyed(self, schema: dict, keyword: bool) -> str:
        """Keyword arguments (`name=value`) or dict entries (`"name": value`) in property order.

        NOTE: two rules per property, linear in their number: `after` is the rest once something
        was written (each entry then starts with a comma), `first` the rest while nothing was.
        """
        properties = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        after, first = "", ""  # the empty rest
        for key, sub in reversed(list(properties.items())):
            label = f"{key}=" if keyword else f"{json.dumps(key)}: "
            entry = f"{json.dumps(label)} {self.value(sub)}"
            if key in required:
                after_i, first_i = f"py_sep {entry} {after}", f"{entry} {after}"
            else:
                after_i = f"(py_sep {entry})? {after}"
                first_i = f"{entry} {after} | {first}" if first else f"({entry} {after})?"
            after, first = self.add(after_i.strip()), self.add(first_i.strip())
        return first
