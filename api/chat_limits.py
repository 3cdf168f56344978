"""What /v1/chat/completions refuses before generating, and the output constraint built off the
event loop.

OpenAI parameters the platform does not implement are refused with a 400 naming them (as OpenAI
answers an unrecognised argument), never silently ignored: a client asking `n: 3` or logprobs
would otherwise read one plain answer as what it asked for. Parameters that change nothing when
left at their defaults are accepted at those values.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from core.errors import ClientError
from inference.grammar.spec import StructuredOutputSpec, parse_structured_output
from inference.protocol import EngineClient, InvalidRequestError

# Read by inference/grammar/spec.py (output constraints).
CONSTRAINT_FIELDS = frozenset(
    {
        "response_format",
        "structured_outputs",
        "guided_json",
        "guided_regex",
        "guided_grammar",
        "guided_choice",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
    }
)
# Accepted and without effect on the answer: bookkeeping fields clients send.
HARMLESS_FIELDS = frozenset({"user", "metadata", "store", "stream_options", "service_tier"})
# Accepted at the value that means "off"; anything else is refused.
DEFAULT_ONLY: dict[str, tuple[Any, ...]] = {
    "n": (1, None),
    "logprobs": (False, None),
    "top_logprobs": (None, 0),
    "frequency_penalty": (0, 0.0, None),
    "presence_penalty": (0, 0.0, None),
    "logit_bias": (None, {}),
}
T = TypeVar("T")
# A grammar that takes longer than this to build is refused (bounds keep real schemas far below).
CONSTRAINT_BUILD_TIMEOUT_S = 10.0


def check_openai_parameters(extra: dict[str, Any]) -> None:
    """400 for an unknown field, or a known one the platform does not implement, set to use it."""
    unknown = sorted(set(extra) - CONSTRAINT_FIELDS - HARMLESS_FIELDS - set(DEFAULT_ONLY))
    if unknown:
        raise ClientError(
            400,
            "unknown_parameter",
            f"unrecognized request argument(s): {', '.join(unknown)}",
            details=unknown,
        )
    for name, allowed in DEFAULT_ONLY.items():
        if name in extra and not any(extra[name] == v and type(extra[name]) is type(v) for v in allowed):
            raise ClientError(
                400,
                "unsupported_parameter",
                f"{name}={extra[name]!r} is not supported by this endpoint (leave it out)",
            )


async def _capped(work: Awaitable[T]) -> T:
    """`work` (off the event loop) under the time cap; its InvalidRequestError is a 400."""
    try:
        return await asyncio.wait_for(work, CONSTRAINT_BUILD_TIMEOUT_S)
    except InvalidRequestError as exc:
        raise ClientError(400, "invalid_request", str(exc)) from exc
    except TimeoutError:
        raise ClientError(
            400,
            "constraint_too_complex",
            f"the output constraint took over {CONSTRAINT_BUILD_TIMEOUT_S:g} s to build; simplify it",
        ) from None


async def build_constraint(extra: dict[str, Any]) -> StructuredOutputSpec | None:
    """The request's output constraint, validated and built off the event loop (xgrammar's
    conversion of a large schema once held the loop, and so every tenant, for 17 s)."""
    return await _capped(asyncio.to_thread(parse_structured_output, extra))


async def precompile(engine: EngineClient, spec: StructuredOutputSpec) -> None:
    """Compile `spec` for the in-process engine, off the event loop, under the time cap."""
    await _capped(engine.precompile(spec))
