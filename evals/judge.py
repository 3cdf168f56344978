"""Model-judged faithfulness of an answer (an answer run's `judge` option), labelled as such.

Each sentence of the answer is put to the generator as "does this passage support this statement?"
with the passage = the sources the sentence cites (all prompt sources when it cites none), and the
verdict constrained to `yes` / `no` (agents/qa/verify.py: the claim check's verifier, here sampled).
The whole answer is judged `repeats` times with different seeds at `temperature`; the item reports
the mean share of supported sentences and its standard deviation over the repeats, so a reader sees
how much the judge itself varies. Sentences shorter than two content words are not judged.
"""

from __future__ import annotations

import statistics

from agents.qa.claims import split_markers
from agents.qa.sentences import content_words, sentence_spans
from agents.qa.verify import engine_verifier
from inference.client import ChatBackend

PASSAGE_CHARS = 2000
# The estimate shown before a run (POST /v1/evals/estimate): a verdict's prompt is the instructions,
# a passage of up to PASSAGE_CHARS (~500 tokens) and the sentence; answers have ~3 sentences.
TOKENS_PER_VERDICT = 560
SENTENCES_PER_ANSWER = 3


def estimate_tokens(items: int, repeats: int) -> int:
    return items * repeats * SENTENCES_PER_ANSWER * TOKENS_PER_VERDICT


def _claims(answer: str, citations: list[dict], sources: list[dict]) -> list[tuple[str, str]]:
    """(sentence without markers, passage) for each sentence worth judging."""
    by_citation = {c["citation"]: c.get("source_number") for c in citations}
    texts = {s["number"]: s.get("text", "") for s in sources}
    out = []
    for start, end in sentence_spans(answer):
        claim, citation_numbers = split_markers(answer[start:end])
        numbers = [by_citation.get(n) for n in dict.fromkeys(citation_numbers)]
        cited = [texts[n] for n in numbers if n in texts] or list(texts.values())
        if len(content_words(claim)) >= 2 and cited:
            out.append((claim, "\n\n".join(cited)[:PASSAGE_CHARS]))
    return out


async def judge_faithfulness(
    backend: ChatBackend,
    answer: str,
    citations: list[dict],
    sources: list[dict],
    repeats: int,
    temperature: float,
) -> dict:
    claims = _claims(answer, citations, sources)
    usage: list = []
    shares = []
    for repeat in range(repeats if claims else 0):
        verify = engine_verifier(backend, temperature=temperature, seed=repeat, usage=usage)
        verdicts = [await verify(passage, claim) for claim, passage in claims]
        decided = [v for v in verdicts if v is not None]
        if decided:
            shares.append(sum(decided) / len(decided))
    return {  # None where nothing was judged (no sentence worth it, or no verdict came back)
        "faithfulness_model_judged": statistics.fmean(shares) if shares else None,
        "faithfulness_model_judged_std": statistics.pstdev(shares) if shares else None,
        "judge_tokens": sum(u.prompt_tokens + u.completion_tokens for u in usage),
    }
