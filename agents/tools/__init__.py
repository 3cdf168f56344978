"""Built-in tools, client-side tools declared by the caller, and `final_answer`."""

from __future__ import annotations

import re
from typing import Any

from agents.tools.base import Tool, ToolContext, ToolResult
from agents.tools.calculator import calculator
from agents.tools.knowledge import (
    DOC_CLOSE,
    DOC_OPEN,
    ask,
    list_collections,
    read_chunk,
    read_document,
    search,
)
from inference.grammar.tools import TOOL_CALL_END, TOOL_CALL_START, normalize_tools
from inference.protocol import InvalidRequestError

BUILTIN: dict[str, Tool] = {
    t.name: t
    for t in map(Tool.from_function, (search, read_chunk, read_document, list_collections, calculator, ask))
}
DEFAULT_TOOLS = ("search", "read_chunk", "calculator")
FINAL_ANSWER = "final_answer"
ANSWER_MAX_CHARS = 300
# The prompts' own markup, which a small model pastes into its answer with the evidence it copies
# (SmolLM2's ReWOO solver wrote `<doc>` quotes and `</tool_call>` into answers).
_MARKUP = re.compile(
    "|".join(map(re.escape, (DOC_OPEN, DOC_CLOSE, TOOL_CALL_START, TOOL_CALL_END))) + r"|\bObservation:\s*"
)


def final_answer_tool(max_sources: int = 3) -> dict:
    """How every agent finishes: the answer and the source numbers it rests on."""
    return {
        "type": "function",
        "function": {
            "name": FINAL_ANSWER,
            "description": "Give the final answer to the task, citing source numbers.",
            "parameters": {
                "type": "object",
                "properties": {
                    "answer": {"type": "string", "minLength": 1, "maxLength": ANSWER_MAX_CHARS},
                    "sources": {
                        "type": "array",
                        "items": {"type": "integer", "minimum": 1, "maximum": 99},
                        "maxItems": max_sources,
                    },
                },
                "required": ["answer", "sources"],
            },
        },
    }


def check_client_tools(tools: Any) -> list[dict]:
    """Caller-declared functions (OpenAI tool shape); ValueError with the reason when invalid."""
    if not tools:
        return []
    try:
        names = [t["name"] for t in normalize_tools(tools)]
    except InvalidRequestError as exc:
        raise ValueError(str(exc)) from exc
    clash = set(names) & (set(BUILTIN) | {FINAL_ANSWER})
    if clash:
        raise ValueError(f"client tool names clash with built-in tools: {sorted(clash)}")
    return list(tools)


# A phrase said three times or more in a row, whatever its case: a small model's loop (SmolLM2's
# ReWOO solver wrote one true sentence, then its source's title over and over up to the answer's
# length cap; or one sentence, capitalised the first time only; its ReAct answer turn, the time it
# had read in one sentence, over and over).
_LOOP = re.compile(r"(?<!\w)(\S.{3,80}?)(?:\s*\1){2,}", re.IGNORECASE)


def answer_text(arguments: dict) -> str:
    """A final_answer call's answer, without the prompts' markup, and without a loop: cut where the
    loop starts, or after its phrase once when the phrase is a whole sentence or the whole answer
    loops."""
    text = " ".join(_MARKUP.sub(" ", str(arguments.get("answer", ""))).split())
    if loop := _LOOP.search(text):
        sentence = loop.group(1).rstrip().endswith((".", "!", "?"))
        text = text[: loop.end(1) if sentence or not loop.start() else loop.start()].rstrip()
    return text


def not_an_answer(arguments: dict) -> str | None:
    """Why a final_answer call's arguments answer nothing: the answer is empty (markup aside), or it
    repeats a tool's `Error:` observation (SmolLM2 copies the last observation it saw)."""
    answer = answer_text(arguments)
    if not answer:
        return "the answer is empty"
    if answer.startswith("Error:"):
        return "the answer is a tool's error message, not an answer to the task"
    return None


__all__ = [
    "ANSWER_MAX_CHARS",
    "BUILTIN",
    "DEFAULT_TOOLS",
    "FINAL_ANSWER",
    "Tool",
    "ToolContext",
    "ToolResult",
    "answer_text",
    "check_client_tools",
    "final_answer_tool",
    "not_an_answer",
]
