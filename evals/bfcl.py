"""BFCL (Berkeley Function Calling Leaderboard) cases: loading and the AST rules of its checker.

A category file `BFCL_v4_<category>.json` holds one case per line (`id`, `question`: chat turns,
`function`: the offered functions with BFCL's Python type names); `possible_answer/` the same
file name with `ground_truth` (the calls, each argument with its list of allowed values; "" in the
list: the argument may be left out; several calls in the `parallel` categories, in any order).
`irrelevance` cases have no answer: the right output is no call.
Used by the `agent` evaluation kind and `benchmarks/agents.py`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

_TYPES = {"dict": "object", "float": "number", "tuple": "array"}


@dataclass
class BfclCase:
    id: str
    messages: list[dict]
    tools: list[dict]  # OpenAI function tools with JSON Schema parameters
    gold: list[dict] | None  # BFCL ground truth; None: no call is right (irrelevance)


def _schema(node):
    """BFCL's Python type names -> JSON Schema (walking schema keywords, not property names)."""
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _schema(prop) for name, prop in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _schema(value)
        elif key == "type" and isinstance(value, str):
            if value != "any":
                out[key] = _TYPES.get(value, value)
        else:  # "default" kept: it tells the model what leaving an optional argument out means
            out[key] = value
    return out


def safe_name(name: str) -> str:
    """BFCL names hold dots; OpenAI function names may not."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64]


def categories(folder: Path) -> list[str]:
    names = (p.name.removeprefix("BFCL_v4_").removesuffix(".json") for p in folder.glob("BFCL_v4_*.json"))
    return sorted(names)


def load_category(folder: Path, category: str) -> list[BfclCase]:
    """The cases of one category (ValueError naming the categories present if it is not there)."""
    path = folder / f"BFCL_v4_{category}.json"
    if not path.is_file():
        raise ValueError(f"no BFCL category {category!r} in the dataset (present: {categories(folder)})")
    gold_file = folder / "possible_answer" / path.name
    answers = {}
    if gold_file.exists():
        answers = {a["id"]: a["ground_truth"] for a in map(json.loads, gold_file.read_text().splitlines())}
    cases = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        case = json.loads(line)
        tools = [
            {
                "type": "function",
                "function": {
                    "name": safe_name(f["name"]),
                    "description": f.get("description", ""),
                    "parameters": _schema(f["parameters"]),
                },
            }
            for f in case["function"]
        ]
        cases.append(BfclCase(case["id"], case["question"][0], tools, answers.get(case["id"])))
    return cases


def _norm(text: str) -> str:
    return re.sub(r"[ ,./\-_*^]", "", text).lower()


def _equal(value, allowed) -> bool:
    if isinstance(allowed, str) and isinstance(value, str):
        return _norm(value) == _norm(allowed)
    if isinstance(allowed, bool) or isinstance(value, bool):
        return value is allowed
    if isinstance(allowed, int | float) and isinstance(value, int | float):
        return float(value) == float(allowed)
    if isinstance(allowed, list) and isinstance(value, list):
        return len(allowed) == len(value) and all(_equal(v, a) for v, a in zip(value, allowed, strict=True))
    if isinstance(allowed, dict) and isinstance(value, dict):
        return all(_arg_ok(value, k, v) for k, v in allowed.items()) and set(value) <= set(allowed)
    return value == allowed


def _arg_ok(arguments: dict, name: str, allowed: list) -> bool:
    if name not in arguments:
        return "" in allowed
    return any(_equal(arguments[name], a) for a in allowed if a != "" or arguments[name] == "")


def _call_ok(name: str, arguments: dict, gold_call: dict) -> bool:
    """BFCL's AST rule for one call: right function, allowed values, required present, nothing extra."""
    gold_name, args = next(iter(gold_call.items()))
    if name != safe_name(gold_name) or set(arguments) - set(args):
        return False
    return all(_arg_ok(arguments, arg, allowed) for arg, allowed in args.items())


def ast_match(calls: list[tuple[str, dict]], gold: list[dict] | None) -> bool:
    """BFCL's rule for a turn: as many calls as gold calls, each matching a different gold call
    (order free, as BFCL's parallel checker has it)."""
    if not gold or len(calls) != len(gold):
        return False

    def assign(i: int, free: frozenset[int]) -> bool:
        if i == len(calls):
            return True
        name, arguments = calls[i]
        return any(_call_ok(name, arguments, gold[j]) and assign(i + 1, free - {j}) for j in free)

    return assign(0, frozenset(range(len(gold))))
