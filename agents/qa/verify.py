"""Verifiers for the claim check: does a passage support a statement? (see claims.py)"""

from __future__ import annotations

from inference.client import ChatBackend, complete_chat
from inference.grammar.spec import StructuredOutputSpec
from inference.protocol import SamplingParams

VERIFY_INSTRUCTIONS = (
    "You check statements against a passage. Answer yes if the passage states the statement or "
    "directly implies it, and no otherwise. Answer with one word: yes or no."
)
YES_NO = StructuredOutputSpec("choice", choices=("yes", "no"))


def engine_verifier(
    backend: ChatBackend, temperature: float = 0.0, seed: int | None = None, usage: list | None = None
):
    """A yes/no verdict from the generator, constrained to exactly `yes` or `no` where the backend
    applies grammars; a backend that ignores the constraint is read leniently, else `None`.
    Greedy by default (the claim check); sampled with `temperature` and `seed` for repeated judging.
    Each call's usage is appended to `usage` when given."""

    async def verify(passage: str, claim: str) -> bool | None:
        messages = [
            {"role": "system", "content": VERIFY_INSTRUCTIONS},
            {
                "role": "user",
                "content": f"Passage: {passage}\n\nStatement: {claim}\n\nIs the statement supported?",
            },
        ]
        params = SamplingParams(max_tokens=3, temperature=temperature, seed=seed, structured_output=YES_NO)
        try:
            text, final = await complete_chat(backend, messages, params)
        except Exception:
            if getattr(backend, "enforces_grammar", False):
                raise
            return None  # a remote server that rejects the constraint: no verdict, not a failed answer
        if usage is not None and final.usage is not None:
            usage.append(final.usage)
        word = text.strip().lower()
        return True if word.startswith("yes") else False if word.startswith("no") else None

    return verify
