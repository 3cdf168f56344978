"""Comparing two runs of the same kind: metric deltas, per-item wins and losses on the main
metric, and a paired significance test on it (paired bootstrap of the mean difference, two-sided,
and a paired t-test), over the items both runs evaluated."""

from __future__ import annotations

import numpy as np
from scipy import stats

BOOTSTRAP_SAMPLES = 10_000


def paired_tests(a: list[float], b: list[float], seed: int = 0) -> dict:
    """p-values for "b's mean differs from a's" (pairs: same item)."""
    diff = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    n = len(diff)
    if n < 2:
        return {"n": n, "mean_delta": float(diff.mean()) if n else 0.0, "bootstrap_p": None, "t_test_p": None}
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, n, size=(BOOTSTRAP_SAMPLES, n))].mean(axis=1)
    # Two-sided: resampled means shifted to a zero mean (the null) as extreme as the observed one.
    centred = means - diff.mean()
    boot_p = float((np.abs(centred) >= abs(diff.mean())).mean())
    t_p = float(stats.ttest_rel(b, a).pvalue) if diff.std() > 0 else float(diff.mean() == 0)
    low, high = np.percentile(means, [2.5, 97.5])
    return {
        "n": n,
        "mean_delta": round(float(diff.mean()), 6),
        "ci95": [round(float(low), 6), round(float(high), 6)],
        "bootstrap_p": round(boot_p, 4),
        "t_test_p": round(t_p, 4),
    }


def compare(
    metrics_a: dict, metrics_b: dict, items_a: dict[str, dict], items_b: dict[str, dict], main: str
) -> dict:
    """`items_*`: {item key: per-item metrics}. Deltas are b - a."""
    deltas = {
        name: round(float(metrics_b[name]) - float(value), 6)
        for name, value in metrics_a.items()
        if isinstance(value, int | float) and isinstance(metrics_b.get(name), int | float)
    }
    common = [
        k
        for k in items_a
        if k in items_b and items_a[k].get(main) is not None and items_b[k].get(main) is not None
    ]
    a = [float(items_a[k][main]) for k in common]
    b = [float(items_b[k][main]) for k in common]
    per_item = [
        {"item": k, "a": x, "b": y, "delta": round(y - x, 6)} for k, x, y in zip(common, a, b, strict=True)
    ]
    per_item.sort(key=lambda r: r["delta"])
    return {
        "metric": main,
        "deltas": deltas,
        "wins": sum(r["delta"] > 0 for r in per_item),
        "losses": sum(r["delta"] < 0 for r in per_item),
        "ties": sum(r["delta"] == 0 for r in per_item),
        "test": paired_tests(a, b),
        "per_item": per_item,
    }
