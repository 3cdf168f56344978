"""Turn a `StructuredOutputSpec` into a tokenizer-independent xgrammar `Grammar`."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import xgrammar as xgr

from inference.grammar.python_calls import python_calls_ebnf
from inference.grammar.tools import tool_call_structural_tag
from inference.protocol import InvalidRequestError

if TYPE_CHECKING:
    from inference.grammar.spec import StructuredOutputSpec

_FROM_JSON_SCHEMA = frozenset({"json_object", "json_schema", "tools"})
_LOG_PREFIX = re.compile(r"^\[[\d:.]+\] \S+:\d+: ")
# NOTE: JSON may carry whitespace between tokens, but at most this many characters in a row.
# Unbounded runs let a small model loop on newlines until max_tokens.
MAX_WHITESPACE_RUN = 1

# xgrammar 0.2.9 (upstream issue #800) spells the characters of a string that has minLength /
# maxLength as this class, which lets raw U+0000-U+001F through (only CR and LF are excluded).
_LENGTH_LIMITED_CHAR = r"[^\"\\\r\n]"
# NOTE: still a single character class, without escapes: xgrammar caches token masks of a class
# repetition, while an alternation with escape sequences costs 5-60 ms per token (measured on
# SmolLM2's vocab). Length-limited strings therefore cannot hold '"', '\\' or control characters,
# as upstream intends, and each repetition is one code point, which is what the lengths count.
_JSON_STRING_CHAR = r"[^\0-\x1f\"\\]"


def build_grammar(spec: StructuredOutputSpec) -> xgr.Grammar:
    """Build the grammar `spec` asks for; xgrammar's rejections become InvalidRequestError."""
    try:
        grammar = _convert(spec)
        # NOTE: only grammars xgrammar derived from JSON schemas; a user's EBNF/regex means what it says.
        return close_control_character_hole(grammar) if spec.kind in _FROM_JSON_SCHEMA else grammar
    except (RuntimeError, ValueError, TypeError) as exc:
        raise InvalidRequestError(f"cannot build a grammar for {spec.kind}: {xgrammar_reason(exc)}") from exc


def xgrammar_reason(exc: Exception) -> str:
    """xgrammar's message without its "[time] /project/cpp/file.cc:line: " prefix."""
    return _LOG_PREFIX.sub("", str(exc)).strip()


def close_control_character_hole(grammar: xgr.Grammar) -> xgr.Grammar:
    """Re-spell length-limited string characters so that they exclude control characters."""
    ebnf = str(grammar)
    if _LENGTH_LIMITED_CHAR not in ebnf:
        return grammar
    return xgr.Grammar.from_ebnf(ebnf.replace(_LENGTH_LIMITED_CHAR, _JSON_STRING_CHAR))


def _convert(spec: StructuredOutputSpec) -> xgr.Grammar:
    match spec.kind:
        case "json_object":
            # NOTE: strict_mode=False, otherwise xgrammar reads {"type": "object"} as "no properties".
            return xgr.Grammar.from_json_schema(
                {"type": "object"}, strict_mode=False, max_whitespace_cnt=MAX_WHITESPACE_RUN
            )
        case "json_schema":
            return xgr.Grammar.from_json_schema(
                json.dumps(spec.json_schema), strict_mode=True, max_whitespace_cnt=MAX_WHITESPACE_RUN
            )
        case "regex":
            return xgr.Grammar.from_regex(spec.regex)
        case "grammar":
            return xgr.Grammar.from_ebnf(spec.ebnf)
        case "choice":
            # json.dumps spells each choice as an EBNF string literal (same escapes).
            return xgr.Grammar.from_ebnf(
                "root ::= " + " | ".join(json.dumps(c, ensure_ascii=False) for c in spec.choices)
            )
        case "tools" if spec.tool_format == "python":
            return xgr.Grammar.from_ebnf(
                python_calls_ebnf(spec.tools, spec.tool_choice, spec.parallel_tool_calls)
            )
        case "tools":
            tag = tool_call_structural_tag(
                spec.tools, spec.tool_choice, spec.parallel_tool_calls, MAX_WHITESPACE_RUN
            )
            return xgr.Grammar.from_structural_tag(tag)
    raise AssertionError(f"unknown structured output kind {spec.kind!r}")
