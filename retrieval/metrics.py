"""Ranking metrics as BEIR reports them (trec_eval conventions): linear gains, log2 discounts,
judgements with grade <= 0 count as not relevant."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence


def ndcg_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)[:k]
    if not ideal:
        return 0.0
    dcg = sum(max(qrels.get(doc, 0), 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg


def recall_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    relevant = {doc for doc, g in qrels.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def mrr_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    for i, doc in enumerate(ranked[:k]):
        if qrels.get(doc, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def average_precision(ranked: Sequence[str], qrels: Mapping[str, int]) -> float:
    """Mean of precision at each relevant document's rank, over all relevant documents."""
    relevant = {doc for doc, g in qrels.items() if g > 0}
    if not relevant:
        return 0.0
    hits, total = 0, 0.0
    for i, doc in enumerate(ranked):
        if doc in relevant:
            hits += 1
            total += hits / (i + 1)
    return total / len(relevant)


def evaluate(runs: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]) -> dict[str, float]:
    """Mean nDCG@10, Recall@10, Recall@100 and MRR@10 over the queries that have judgements."""
    queries = [q for q in qrels if any(g > 0 for g in qrels[q].values())]
    if not queries:
        return {"ndcg@10": 0.0, "recall@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}
    metrics = {
        "ndcg@10": lambda r, j: ndcg_at_k(r, j, 10),
        "recall@10": lambda r, j: recall_at_k(r, j, 10),
        "recall@100": lambda r, j: recall_at_k(r, j, 100),
        "mrr@10": lambda r, j: mrr_at_k(r, j, 10),
    }
    return {
        name: sum(fn(runs.get(q, []), qrels[q]) for q in queries) / len(queries)
        for name, fn in metrics.items()
    }
