"""Metrics of evaluation runs.

Retrieval: nDCG@10, Recall@10/100, MRR@10 and MAP per query from pytrec_eval (trec_eval's code:
linear gains, log2 discounts, grade >= 1 relevant), averaged over the queries with at least one
relevant judgement (a query without a ranking scores 0), as BEIR reports them. The only IR metric
code of the platform: evaluation runs and benchmarks both call it.

Answers: exact match and token F1 as SQuAD's evaluation script computes them, after its
normalisation (`normalize_answer`: lower case, ASCII punctuation deleted, the articles a/an/the
dropped, whitespace collapsed), which first removes our citation markers (`[2]`, `[1, 3]`: the
answer's format, not its words); answer-contains-gold (the normalised reference is a substring of
the normalised answer), citation precision/recall against gold documents, and no-answer accuracy
on unanswerable items.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pytrec_eval

# Our name -> (pytrec_eval measure, its key in the per-query output, run cut-off)
RETRIEVAL_MEASURES = {
    "ndcg@10": ("ndcg_cut.10", "ndcg_cut_10", None),
    "recall@10": ("recall.10", "recall_10", None),
    "recall@100": ("recall.100", "recall_100", None),
    "mrr@10": ("recip_rank", "recip_rank", 10),
    "map": ("map", "map", None),
}
MAIN_METRIC = {"retrieval": "ndcg@10", "answer": "token_f1", "agent": "success"}


def judged(qrels: Mapping[str, Mapping[str, int]]) -> list[str]:
    return [q for q, docs in qrels.items() if any(g > 0 for g in docs.values())]


def retrieval_per_query(
    ranked: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, dict[str, float]]:
    """{query id: {metric: value}} for every judged query (0 where it has no ranking)."""
    queries = judged(qrels)
    out = {q: dict.fromkeys(RETRIEVAL_MEASURES, 0.0) for q in queries}
    gold = {q: {d: int(g) for d, g in qrels[q].items()} for q in queries}
    for cut in {c for _, _, c in RETRIEVAL_MEASURES.values()}:
        measures = {m for m, _, c in RETRIEVAL_MEASURES.values() if c == cut}
        # NOTE: trec_eval orders by score (ties by doc id), so scores encode our ranks exactly.
        run = {
            q: {doc: float(len(docs) - i) for i, doc in enumerate(docs[:cut] if cut else docs)}
            for q, docs in ranked.items()
            if q in gold and docs
        }
        per_query = pytrec_eval.RelevanceEvaluator(gold, measures).evaluate(run)
        for q, values in per_query.items():
            for name, (_, key, c) in RETRIEVAL_MEASURES.items():
                if c == cut:
                    out[q][name] = float(values[key])
    return out


def retrieval_metrics(
    ranked: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]
) -> dict[str, float]:
    """The mean of each retrieval metric over the judged queries (0 for each when none is judged)."""
    per_query = retrieval_per_query(ranked, qrels)
    return {
        name: float(np.mean([v[name] for v in per_query.values()])) if per_query else 0.0
        for name in RETRIEVAL_MEASURES
    }


def mean_metrics(per_item: Iterable[Mapping[str, float | None]]) -> dict[str, float]:
    """Mean of each metric over the items that have it (None: not applicable to that item)."""
    sums: dict[str, list[float]] = {}
    for metrics in per_item:
        for name, value in metrics.items():
            if value is not None:
                sums.setdefault(name, []).append(float(value))
    return {name: round(float(np.mean(values)), 4) for name, values in sums.items()}


def latency_summary(latencies_ms: Sequence[float], tokens: Sequence[int]) -> dict[str, float]:
    if not latencies_ms:
        return {}
    return {
        "latency_ms_p50": round(float(np.percentile(latencies_ms, 50)), 2),
        "latency_ms_p99": round(float(np.percentile(latencies_ms, 99)), 2),
        "tokens_total": int(sum(tokens)),
        "tokens_mean": round(float(np.mean(tokens)), 1) if tokens else 0.0,
    }


_CITATION_MARKER = re.compile(r"\[\d+(?:\s*,\s*\d+)*\]")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    text = _CITATION_MARKER.sub(" ", text).lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD's token F1 on normalised words (1.0 when both are empty, 0.0 when only one is)."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(reference).split()
    common = sum((Counter(pred) & Counter(ref)).values())
    if not pred or not ref or common == 0:
        return float(pred == ref)
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def answer_metrics(
    answer: str,
    reference: str | None,
    refused: bool,
    cited_docs: Sequence[str],
    gold_docs: Sequence[str],
) -> dict[str, float | None]:
    """One item's answer metrics; None where a metric does not apply (e.g. citation recall without
    gold documents, exact match on an unanswerable item)."""
    answerable = bool(reference and reference.strip())
    out: dict[str, float | None] = {
        "exact_match": None,
        "token_f1": None,
        "contains_gold": None,
        "citation_precision": None,
        "citation_recall": None,
        "no_answer_accuracy": None if answerable else float(refused),
        "refused": float(refused),
    }
    if answerable:
        out["exact_match"] = float(normalize_answer(answer) == normalize_answer(reference))
        out["token_f1"] = token_f1(answer, reference)
        out["contains_gold"] = float(normalize_answer(reference) in normalize_answer(answer))
    if gold_docs and answerable:
        cited, gold = set(cited_docs), set(gold_docs)
        out["citation_precision"] = len(cited & gold) / len(cited) if cited else 0.0
        out["citation_recall"] = len(cited & gold) / len(gold)
    return out
