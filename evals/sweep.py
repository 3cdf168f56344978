"""Sweeps: a grid of retrieval settings, evaluated as variants of one run, reported as a
quality-vs-latency table with its Pareto front (JSON for the web UI, a matplotlib plot for reports)."""

from __future__ import annotations

import io
import itertools
from typing import Any

from evals.metrics import MAIN_METRIC
from retrieval.config import deep_merge

MAX_VARIANTS = 64


def _nested(dotted: str, value: Any) -> dict:
    out: Any = value
    for part in reversed(dotted.split(".")):
        out = {part: out}
    return out


def expand_grid(base: dict, grid: dict[str, list]) -> list[dict]:
    """Variants {"label", "overrides"}: the cartesian product of `grid` ({"fusion.alpha": [0.3, 0.5],
    "dense.candidates": [100, 300]}) over the base overrides; without a grid, the base alone."""
    if not grid:
        return [{"label": "base", "overrides": base}]
    keys = list(grid)
    combos = list(itertools.product(*(grid[k] for k in keys)))
    if len(combos) > MAX_VARIANTS:
        raise ValueError(f"the sweep has {len(combos)} points; at most {MAX_VARIANTS}")
    variants = []
    for combo in combos:
        overrides = base
        for key, value in zip(keys, combo, strict=True):
            overrides = deep_merge(overrides, _nested(key, value))
        label = ",".join(f"{k}={v}" for k, v in zip(keys, combo, strict=True))
        variants.append({"label": label, "overrides": overrides})
    return variants


def pareto_front(points: list[tuple[float, float]]) -> list[bool]:
    """For (quality, latency) points: True where no other point is at least as good on both and
    better on one."""
    return [not any(q2 >= q and l2 <= lat and (q2 > q or l2 < lat) for q2, l2 in points) for q, lat in points]


def sweep_table(kind: str, variants: list[dict], by_variant: dict[str, dict]) -> dict:
    metric = MAIN_METRIC[kind]
    rows = [
        {
            "label": v["label"],
            "overrides": v["overrides"],
            metric: by_variant[v["label"]].get(metric, 0.0),
            "latency_ms_p50": by_variant[v["label"]].get("latency_ms_p50", 0.0),
            "latency_ms_p99": by_variant[v["label"]].get("latency_ms_p99", 0.0),
        }
        for v in variants
    ]
    front = pareto_front([(r[metric], r["latency_ms_p50"]) for r in rows])
    for row, on_front in zip(rows, front, strict=True):
        row["pareto"] = on_front
    best = max(rows, key=lambda r: (r[metric], -r["latency_ms_p50"]))
    return {"metric": metric, "x": "latency_ms_p50", "rows": rows, "best": best["label"]}


def plot(table: dict, fmt: str = "png", title: str = "") -> bytes:
    """Quality vs p50 latency, the Pareto front joined and labelled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric, rows = table["metric"], table["rows"]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    ax.scatter(
        [r["latency_ms_p50"] for r in rows], [r[metric] for r in rows], color="#9aa5b1", label="setting"
    )
    front = sorted((r for r in rows if r["pareto"]), key=lambda r: r["latency_ms_p50"])
    ax.plot(
        [r["latency_ms_p50"] for r in front],
        [r[metric] for r in front],
        "o-",
        color="#d9480f",
        label="Pareto front",
    )
    for r in front:
        ax.annotate(
            r["label"],
            (r["latency_ms_p50"], r[metric]),
            fontsize=7,
            xytext=(4, 4),
            textcoords="offset points",
        )
    ax.set_xlabel("latency p50 (ms)")
    ax.set_ylabel(metric)
    ax.set_title(title or f"{metric} vs latency")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt)
    plt.close(fig)
    return buf.getvalue()
