"""The model cascade (`qa.cascade`; FrugalGPT's model cascading): the first, smallest model answers;
when our own checks find its answer weak, the next model answers the same prompt instead, and so
on; the last model's answer stands whatever the checks say.

Weak, cheapest test first (`weakness`):
- `truncated`: a written answer cut by its token ceiling (`finish_reason` "length");
- `refusal`: a written answer saying the documents do not hold the answer although the best source
  scores at least `qa.cascade_strong_sources` (weaker sources are the no-answer gate's to refuse);
- `unsupported_claims`: more than `qa.cascade_max_unsupported` of its sentences unsupported in the
  claim check (claims.py);
- `incomplete_answer`: a written answer that never mentions one of the things the question names
  (completeness.py); a quote is left alone, since the next model would quote the same sentences;
- `low_quote_score`: a quote whose sentences score under `qa.cascade_min_quote_score` on average.

NOTE: an answer that may still be replaced is held back, never streamed: an OpenAI stream cannot
take text back. Only the last model's answer streams as it is generated.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING

from agents.qa.completeness import missing_things
from core.settings.qa import QASettings
from inference.client import Usage
from inference.provider import Rung

if TYPE_CHECKING:
    from agents.qa.attempts import Answer

# A rung -> its answer's text pieces as generated; the Answer is appended to the list at the end.
Attempt = Callable[[Rung, list["Answer"]], AsyncIterator[str]]
# An answer and whether its model is the last -> why it is weak (None: it stands).
Judge = Callable[["Answer", bool], Awaitable[str | None]]

_REFUSAL = re.compile(
    r"\b(?:do(?:es)? not|don't|doesn't) (?:contain|include|mention|say|provide|state)|"
    r"\bnot (?:in|mentioned in|found in) the (?:documents|sources)|\bno information\b",
    re.IGNORECASE,
)


def weakness(
    answer: Answer, claims: list[dict] | None, best_source: float, settings: QASettings, question: str = ""
) -> str | None:
    """Why `answer` to `question` (its sentences checked into `claims`) should go to the next model,
    or None."""
    if answer.mode == "generate":
        if answer.finish_reason == "length":
            return "truncated"
        if _REFUSAL.search(answer.text) and best_source >= settings.cascade_strong_sources:
            return "refusal"
    if too_unsupported(claims or [], settings):
        return "unsupported_claims"
    if answer.mode == "generate" and missing_things(question, answer.text):
        return "incomplete_answer"
    if answer.quote_score is not None and answer.quote_score < settings.cascade_min_quote_score:
        return "low_quote_score"
    return None


def too_unsupported(claims: list[dict], settings: QASettings) -> bool:
    """Whether more than `qa.cascade_max_unsupported` of the checked sentences are unsupported (the
    asks' and the agent runs' test, agents/runs/grounding.py)."""
    unsupported = sum(1 for c in claims if c["supported"] is False)
    return bool(claims) and unsupported / len(claims) > settings.cascade_max_unsupported


async def cascade(rungs: list[Rung], attempt: Attempt, judge: Judge) -> AsyncIterator[str | Answer]:
    """The text pieces of the answer that stands, then that Answer, its `model` and `escalations`
    set and its usage summed over every model that tried (all of it was spent)."""
    escalations: list[dict] = []
    spent = Usage()
    for i, rung in enumerate(rungs):
        last = i == len(rungs) - 1
        held: list[str] = []
        out: list[Answer] = []
        async for text in attempt(rung, out):
            if last:
                yield text
            else:
                held.append(text)
        answer = out[0]
        spent += answer.usage
        reason = await judge(answer, last)
        if reason is None or last:
            for text in held:
                yield text
            answer.model, answer.escalations, answer.usage = rung.name, escalations, spent
            yield answer
            return
        escalations.append({"from": rung.name, "reason": reason})
