"""Metrics of evaluation runs: IR metrics by hand and averaged over fixed runs, answer metrics by
hand, sweeps' grids and Pareto fronts, the paired tests, and convex fusion by hand."""

from __future__ import annotations

import math
import random
import uuid

import pytest

from core.settings.retrieval import FusionConfig
from evals.compare import compare, paired_tests
from evals.metrics import (
    answer_metrics,
    mean_metrics,
    normalize_answer,
    retrieval_metrics,
    retrieval_per_query,
    token_f1,
)
from evals.runner import spread_sample
from evals.sweep import expand_grid, pareto_front, plot, sweep_table
from retrieval.fusion import fuse
from retrieval.types import ranked


def _fixed_runs(seed: int = 7):
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(150)]
    qrels, runs = {}, {}
    for q in range(25):
        judged = rng.sample(docs, 12)
        qrels[f"q{q}"] = {d: rng.choice([0, 1, 1, 2]) for d in judged}
        runs[f"q{q}"] = rng.sample(docs, 120)
    qrels["q_none"] = {"d1": 0}  # no relevant document: not averaged
    runs.pop("q3")  # a judged query without a ranking scores 0
    return runs, qrels


def _one(ranking: list[str], qrels: dict[str, int]) -> dict[str, float]:
    return retrieval_per_query({"q": ranking}, {"q": qrels})["q"]


FILLER = [f"x{i}" for i in range(10)]  # ten unjudged documents: what follows is past the @10 cut


def test_ndcg_by_hand():
    qrels = {"a": 2, "b": 1, "c": 0}
    # ranking b, x, a: DCG = 1/log2(2) + 0 + 2/log2(4) = 2; ideal a, b: 2 + 1/log2(3)
    assert _one(["b", "x", "a"], qrels)["ndcg@10"] == pytest.approx(2 / (2 + 1 / math.log2(3)))
    assert _one(["a", "b"], qrels)["ndcg@10"] == pytest.approx(1.0)
    assert _one([*FILLER, "a"], qrels)["ndcg@10"] == 0.0
    # nothing relevant: the query is not averaged, and no division by zero
    assert retrieval_per_query({"q": ["a"]}, {"q": {"z": 0}}) == {}
    assert retrieval_metrics({"q": ["a"]}, {"q": {"z": 0}})["ndcg@10"] == 0.0


def test_recall_mrr_and_map_by_hand():
    qrels = {"a": 1, "b": 1, "c": 2, "d": 0}
    assert _one(["d", "a", "x", "c"], qrels)["recall@10"] == pytest.approx(2 / 3)
    assert _one([*FILLER[:9], "a", "c"], qrels)["recall@10"] == pytest.approx(1 / 3)
    assert _one([*FILLER[:9], "a", "c"], qrels)["recall@100"] == pytest.approx(2 / 3)
    assert _one(["d", "x", "c"], qrels)["mrr@10"] == pytest.approx(1 / 3)  # grade 0 is not relevant
    assert _one([*FILLER, "c"], qrels)["mrr@10"] == 0.0
    # precision at each relevant document's rank (a at 2, c at 4), over all 3 relevant documents
    assert _one(["d", "a", "x", "c"], qrels)["map"] == pytest.approx((1 / 2 + 2 / 4) / 3)


def test_means_over_judged_queries_on_fixed_runs():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}}
    scores = retrieval_metrics({"q1": ["a"], "q2": ["x", "b"]}, qrels)
    assert scores["mrr@10"] == pytest.approx((1 + 0.5) / 2)  # q3 has no relevant document: skipped
    assert scores["recall@100"] == pytest.approx(1.0)
    runs, qrels = _fixed_runs()
    per_query = retrieval_per_query(runs, qrels)
    assert set(per_query) == {q for q in qrels if q != "q_none"}
    means = retrieval_metrics(runs, qrels)
    assert 0 < means["ndcg@10"] < 1 and per_query["q3"]["ndcg@10"] == 0.0
    assert means["map"] == pytest.approx(sum(v["map"] for v in per_query.values()) / 25)


def test_answer_normalisation_is_squads_after_our_citation_markers():
    assert normalize_answer("The E. coli-strain [1, 3], an answer!") == "e colistrain answer"
    assert normalize_answer("Released on 12 March 2026 [2].") == "released on 12 march 2026"
    assert token_f1("12 March 2026 [1]", "12 march, 2026") == 1.0
    assert token_f1("", "") == 1.0 and token_f1("x", "") == 0.0


def test_answer_metrics_by_hand():
    assert token_f1("The cat sat.", "a cat sat down") == pytest.approx(2 * (2 / 2) * (2 / 3) / (1 + 2 / 3))
    m = answer_metrics("It was released on 12 March 2026 [1].", "12 March 2026", False, ["a", "b"], ["a"])
    assert m["exact_match"] == 0.0 and m["contains_gold"] == 1.0
    assert (m["citation_precision"], m["citation_recall"]) == (0.5, 1.0)
    assert m["no_answer_accuracy"] is None
    refused = answer_metrics("The documents do not contain the answer.", None, True, [], [])
    assert refused["no_answer_accuracy"] == 1.0 and refused["token_f1"] is None
    assert answer_metrics("x", "", False, [], [])["no_answer_accuracy"] == 0.0
    assert mean_metrics([m, refused])["refused"] == 0.5


def test_sweep_grid_table_and_pareto():
    variants = expand_grid(
        {"top_k": 20}, {"fusion.method": ["rrf", "convex"], "dense.candidates": [100, 300]}
    )
    assert [v["label"] for v in variants][0] == "fusion.method=rrf,dense.candidates=100"
    assert variants[3]["overrides"] == {
        "top_k": 20,
        "fusion": {"method": "convex"},
        "dense": {"candidates": 300},
    }
    assert expand_grid({"mode": "bm25"}, {}) == [{"label": "base", "overrides": {"mode": "bm25"}}]
    assert pareto_front([(0.5, 10), (0.6, 20), (0.55, 30), (0.6, 25)]) == [True, True, False, False]
    by_variant = {
        v["label"]: {"ndcg@10": 0.3 + i / 100, "latency_ms_p50": 10 + i} for i, v in enumerate(variants)
    }
    table = sweep_table("retrieval", variants, by_variant)
    assert table["best"] == variants[3]["label"] and all(r["pareto"] for r in table["rows"])
    assert plot(table, "png").startswith(b"\x89PNG") and b"<svg" in plot(table, "svg")


def test_paired_tests_and_compare():
    a = [0.2, 0.4, 0.1, 0.5, 0.3, 0.6, 0.2, 0.4]
    same = paired_tests(a, a)
    assert same["mean_delta"] == 0 and same["t_test_p"] == 1.0
    better = paired_tests(a, [x + 0.2 + 0.01 * i for i, x in enumerate(a)])
    assert better["bootstrap_p"] < 0.01 and better["t_test_p"] < 0.01 and better["ci95"][0] > 0
    items_a = {str(i): {"ndcg@10": x} for i, x in enumerate(a)}
    items_b = {**items_a, "0": {"ndcg@10": 0.9}, "1": {"ndcg@10": 0.0}}
    out = compare({"ndcg@10": 0.35}, {"ndcg@10": 0.4}, items_a, items_b, "ndcg@10")
    assert (out["wins"], out["losses"], out["ties"]) == (1, 1, 6)
    assert out["deltas"] == {"ndcg@10": pytest.approx(0.05)}


def test_convex_fusion_by_hand():
    a, b, c = (uuid.UUID(int=i) for i in (1, 2, 3))
    rankings = {"bm25": ranked("bm25", [(a, 8.0), (b, 4.0)]), "dense": ranked("dense", [(b, 0.6), (c, 0.2)])}
    fused = fuse(
        FusionConfig(method="convex", alpha=0.75, normalization="tm2c2"), rankings, {"bm25": 2, "dense": 2}
    )
    scores = {h.chunk_id: h.score for h in fused}
    # tm2c2: bm25 over [0, 8], dense over [-1, 0.6]; a document a list missed scores its floor
    # (bm25 4, dense 0.2), and fused scores count from those floors.
    assert scores[a] == pytest.approx(0.25 * (8 - 4) / 8)
    assert scores[b] == pytest.approx(0.75 * (0.6 - 0.2) / 1.6)
    assert scores[c] == pytest.approx(0.0)
    assert [h.chunk_id for h in fused] == [b, a, c] and fused[0].ranks["convex"] == 1
    minmax = fuse(FusionConfig(method="convex", alpha=0.5, normalization="minmax"), rankings)
    assert [h.chunk_id for h in minmax] == [a, b, c]  # ties broken by id; a: 0.5, b: 0.5, c: 0
    assert {h.chunk_id: h.score for h in minmax}[b] == pytest.approx(0.5)
    # lists shorter than asked are exhaustive: what they missed scores the minimum (bm25 0, cosine -1)
    whole = fuse(FusionConfig(method="convex", alpha=0.75), rankings, {"bm25": 10, "dense": 10})
    assert {h.chunk_id: h.score for h in whole}[c] == pytest.approx(0.75 * 1.2 / 1.6)
    assert {h.chunk_id: h.score for h in whole}[a] == pytest.approx(0.25)


def test_max_items_takes_a_seeded_spread_sample_in_file_order():
    keys = [f"k{i:03d}" for i in range(200)]
    sample = spread_sample(keys, 40)
    assert len(sample) == 40 and sample == sorted(sample)  # file order kept
    assert sample == spread_sample(keys, 40)  # the same sample every run
    assert sample[-1] > "k150" and sample != keys[:40]  # spread over the file
    assert spread_sample(keys, 40, seed=1) != sample
    assert spread_sample(keys, 500) == keys
