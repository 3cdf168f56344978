"""The claim check of an agent run's answer: is each sentence supported by the sources the run read?

The asks' check (agents/qa/claims.py) runs on the answer of every run that answered, lexically only
(no verifier: a run already spent its LLM budget): each sentence against the sources it cites with
`[n]`, else against those its final_answer call names (together: "X is a town; Y is a river" rests
on two), else against every source the run gathered. A figure or a name no source states, or a
sentence sharing under half of its content words with any one or two neighbouring sentences of a
source, is `unsupported`; a sentence the sources nearly copy is `supported`; between the two it is
`unknown`. A run that gathered no sources (a calculator or client-tool run) has nothing to check.

The result is the run's `claim_check` trace step (the run's `claims` are read from it), with the
things the task names that the answer never mentions (`missing`, agents/qa/completeness.py). With
`qa.cascade`, an answer with more than `qa.cascade_max_unsupported` of its sentences unsupported
(`unsupported_claims`) or one leaving out a named thing (`incomplete_answer`) is weak, and the next
model runs the task again (agents/runs/runner.py).
"""

from __future__ import annotations

import time

from agents.qa.claims import check_claims
from agents.qa.sources import Source

CLAIM_CHECK = "claim_check"


def _source(entry: dict) -> Source:
    return Source(
        number=int(entry["number"]),
        chunk_id=str(entry.get("chunk_id") or ""),
        document_id=str(entry.get("document_id") or ""),
        title=str(entry.get("title") or ""),
        text=str(entry.get("text") or ""),
        score=float(entry.get("score") or 0.0),
        char_start=entry.get("char_start"),
    )


async def check_answer(values: dict) -> list[dict]:
    """One claim per sentence of the run's answer (agents/qa/claims.py `claim_entry`); [] when the
    run has no answer or gathered no source text."""
    answer = values.get("answer") or ""
    sources = [_source(s) for s in (values.get("sources") or {}).values() if s.get("text")]
    if not answer or not sources:
        return []
    # NOTE: an agent's markers are the run's source numbers themselves (no renumbering).
    citations = [{"citation": s.number, "source_number": s.number} for s in sources]
    named = {c.get("number") for c in values.get("citations") or []}
    answer_cites = [s for s in sources if s.number in named]
    return await check_claims(answer, citations, sources, verify=None, answer_cites=answer_cites)


def claim_step(model: str | None, claims: list[dict], missing: list[str] | None = None) -> dict:
    """The trace step holding the check of the answer `model` wrote; `missing`: the things the task
    names that the answer leaves out (agents/qa/completeness.py)."""
    return {
        "type": CLAIM_CHECK,
        "model": model,
        "sentences": len(claims),
        "unsupported": sum(1 for c in claims if c["supported"] is False),
        "claims": claims,
        "missing": missing or [],
        "at": round(time.time(), 3),
    }


def claims_of(trace: list[dict]) -> list[dict] | None:
    """The claims of the run's last checked answer (None: no answer was checked)."""
    steps = [step for step in trace if step.get("type") == CLAIM_CHECK]
    return steps[-1]["claims"] if steps else None
