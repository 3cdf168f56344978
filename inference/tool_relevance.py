"""Whether one of the offered tools fits the user's request, asked of the model before an "auto" turn.

Small models offered tools call one for nearly every request: under tool_choice "auto",
Qwen2.5-Coder-1.5B in the Python call layout called a function for 31 of 32 BFCL `irrelevance`
questions, and the tools prompt's "if none of the functions can be used, say so" did not change
that. Asked afterwards, as one more user turn, whether one of the functions can do what was asked,
the same model mostly knows: at a threshold of 0.7 (chosen on the first 16 cases of each category)
23 of those 32 questions got a text answer, and 2 of 32 relevant `live_simple` turns lost their call
(`python -m benchmarks.agents --auto --tool-relevance 0.7 [--offset 16]`, bfcl-dev). The answer is
only as good as the model: Qwen2.5-Coder-0.5B's P(yes) does not tell the cases apart, and at 0.7
it declined all 32 turns. So the check is off unless a threshold is given for the model served.

`tools_fit` asks that question and returns P(yes) / (P(yes) + P(no)) from the first token's top
log-probabilities. A server or agent whose threshold the score misses makes the turn as with
tool_choice "none": the model, shown no tools, answers in text.

The question follows the conversation exactly as the call turn renders it, so the prefix cache
hands the whole prompt on to that turn: the check costs the question's few tokens and one decoded
token with the cache on (`enable_prefix_caching`): 0.4-0.7 s a turn for the 1.5B on 2 cores.

`declines_tools` is the one entry point (the server's chat route, the agents' chat model): it shows
the conversation in the turn's call layout and compares the score with the threshold.

NOTE: only a turn that answers a user message is checked: after tool results the question ("do
what I asked") would judge the first request again, not whether more calls are needed.
"""

from __future__ import annotations

import math
import uuid

from inference.chat_template import python_messages
from inference.grammar.spec import ToolFormat
from inference.protocol import EngineClient, InvalidRequestError, SamplingParams

QUESTION = "Can one of these functions, called with suitable arguments, do what I asked? Answer yes or no."

# Top log-probabilities read from the answer's first token (the engine's most).
_TOP = 20


async def declines_tools(
    engine: EngineClient,
    messages: list[dict],
    tools: list[dict],
    tool_format: ToolFormat,
    threshold: float | None,
    cache_salt: str | None = None,
) -> bool:
    """Whether an "auto" turn over `messages` (as the client sent them) should go without `tools`:
    it answers a user message and the model's P(yes) is under `threshold` (None: never asked)."""
    if threshold is None or not messages or messages[-1].get("role") != "user":
        return False
    shown, shown_tools = (
        (python_messages(messages, tools), None) if tool_format == "python" else (messages, tools)
    )
    return await tools_fit(engine, shown, shown_tools, cache_salt) < threshold


async def tools_fit(
    engine: EngineClient, messages: list[dict], tools: list[dict] | None, cache_salt: str | None = None
) -> float:
    """The model's P(yes) that a tool fits, `messages` (and `tools`, for templates that render them)
    as the call turn shows them; 1.0 (keep the tools) when the question does not fit the context or
    neither answer is among the likeliest tokens."""
    asked = [*messages, {"role": "user", "content": QUESTION}]
    prompt = engine.apply_chat_template(asked, add_generation_prompt=True, tools=tools)
    params = SamplingParams(max_tokens=1, temperature=0.0, logprobs=_TOP, cache_salt=cache_salt)
    last = None
    try:
        async for output in engine.generate(uuid.uuid4().hex, prompt, params):
            last = output
    except InvalidRequestError:  # the question pushed a prompt that fits past the context
        return 1.0
    top = last.logprobs[0].top if last is not None and last.logprobs else {}
    mass = {"yes": 0.0, "no": 0.0}
    for token_id, logprob in top.items():
        word = engine.decode([token_id]).strip().lower()
        if word in mass:
            mass[word] += math.exp(logprob)
    total = mass["yes"] + mass["no"]
    return mass["yes"] / total if total > 0 else 1.0
