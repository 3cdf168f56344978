"""Chat messages to prompt text, with OpenAI `tools` made visible to models whose template ignores them.

A template that knows tools (Qwen, Llama 3.1, SmolLM3...) renders them its own way. One that does not
(SmolLM2) would leave the model blind to the tools `tool_choice="auto"` lets it call; for those, a
system message lists the tools and the exact call layout the grammar enforces (`grammar/tools.py`).
In the Python call layout (`grammar/python_calls.py`) every model gets its system text instead
(`python_messages`), with the conversation's earlier calls written in that layout.
"""

from __future__ import annotations

import json
from typing import Any

from inference.grammar.python_calls import calls_text, python_tools_prompt
from inference.grammar.tool_parser import parse_tool_calls
from inference.grammar.tools import TOOL_CALL_END, TOOL_CALL_START


def render_chat(
    tokenizer: Any, messages: list[dict], tools: list[dict] | None = None, add_generation_prompt: bool = True
) -> str:
    """The prompt text of `messages` under the tokenizer's chat template, tools included."""

    def render(msgs: list[dict], with_tools: list[dict] | None) -> str:
        return tokenizer.apply_chat_template(
            msgs, tools=with_tools, add_generation_prompt=add_generation_prompt, tokenize=False
        )

    if not tools:
        return render(messages, None)
    with_tools = render(messages, tools)
    # NOTE: a template that ignores `tools` renders the same text with and without them.
    if with_tools != render(messages, None):
        return with_tools
    return render(with_system_text(messages, tools_prompt(tools)), None)


def with_system_text(messages: list[dict], prompt: str) -> list[dict]:
    """`messages` with `prompt` added to the leading system message (or as a new one)."""
    if messages and messages[0].get("role") == "system":
        first = messages[0]
        content = first.get("content") or ""
        merged = {**first, "content": f"{content}\n\n{prompt}" if content else prompt}
        return [merged, *messages[1:]]
    return [{"role": "system", "content": prompt}, *messages]


def tools_prompt(tools: list[dict]) -> str:
    """The tools as JSON function signatures, and how to call one."""
    signatures = "\n".join(
        json.dumps(tool["function"], ensure_ascii=False)
        for tool in tools
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict)
    )
    example = json.dumps({"name": "<function-name>", "arguments": {"<arg-name>": "<arg-value>"}})
    return (
        "You may call one or more functions to help with the user's request. The available functions:\n"
        f"<tools>\n{signatures}\n</tools>\n\n"
        "To call a function, answer with a JSON object holding its name and arguments, inside tags:\n"
        f"{TOOL_CALL_START}\n{example}\n{TOOL_CALL_END}\n"
        "Otherwise, answer in plain text."
    )


def python_messages(messages: list[dict], tools: list[dict]) -> list[dict]:
    """`messages` as the model reads them in this layout: the tools prompt in the system message, and
    each assistant turn's calls (OpenAI `tool_calls`, or `<tool_call>` blocks in its content, as the
    platform's agents keep them) written as a call list after its text."""
    shown = []
    for message in messages:
        if message.get("role") == "assistant":
            message = _calls_written(message)
        shown.append(message)
    return with_system_text(shown, python_tools_prompt(tools))


def _calls_written(message: dict) -> dict:
    parsed = parse_tool_calls(message.get("content") or "")
    openai_calls = [*(message.get("tool_calls") or []), *parsed.tool_calls]
    if not openai_calls:
        return message
    try:
        calls = [(c["function"]["name"], _arguments(c["function"].get("arguments"))) for c in openai_calls]
    except (KeyError, TypeError, ValueError):
        return message  # not readable as calls: the chat template shows it as it is
    text = parsed.content.strip() if parsed.content else ""
    rest = {k: v for k, v in message.items() if k != "tool_calls"}
    return {**rest, "content": f"{text}\n{calls_text(calls)}" if text else calls_text(calls)}


def _arguments(raw: Any) -> dict:
    arguments = json.loads(raw) if isinstance(raw, str) else raw if raw is not None else {}
    if not isinstance(arguments, dict):
        raise ValueError("arguments are not an object")
    return arguments
