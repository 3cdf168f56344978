"""/v1/evals shapes built by evals/service.py, evals/compare.py and evals/sweep.py."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class EvalItemOut(BaseModel):
    variant: str
    item_key: str
    query: str
    output: dict[str, Any] = Field(description="Ranked ids with scores, or the answer and its citations.")
    metrics: dict[str, Any]
    latency_ms: float
    tokens: int
    worker: str | None
    created_at: datetime


class EstimateOut(BaseModel):
    variants: int
    items: int | None = Field(default=None, description="Items evaluated, all variants (answer runs).")
    judge_verdicts: int | None = None
    judge_tokens: int | None = None


class RunVariant(BaseModel):
    id: str
    variant: str


class CompareOut(BaseModel):
    a: RunVariant
    b: RunVariant
    metric: str = Field(description="The main metric the items are compared on.")
    deltas: dict[str, float] = Field(description="b - a of every metric both runs have.")
    wins: int
    losses: int
    ties: int
    test: dict[str, Any] = Field(description="Paired bootstrap and paired t-test on the main metric.")
    per_item: list[dict[str, Any]]


class SweepRow(BaseModel):
    model_config = ConfigDict(extra="allow")  # the main metric's value, under its own name

    label: str
    overrides: dict[str, Any]
    latency_ms_p50: float
    latency_ms_p99: float
    pareto: bool


class SweepOut(BaseModel):
    metric: str
    x: str
    rows: list[SweepRow]
    best: str


class ApplyOut(BaseModel):
    collection_id: str
    variant: str
    retrieval: dict[str, Any] = Field(description="The collection's retrieval config after the merge.")


class DatasetOut(BaseModel):
    id: str = Field(description="The dataset's id: DELETE /v1/evals/datasets/{id} removes it.")
    path: str = Field(description="Where the dataset is, relative to <data_dir>/evals/: give it to a run.")
    files: list[str]
    bytes: int


class FeedbackDatasetOut(BaseModel):
    id: str
    path: str
    format: str
    items: int
    skipped_without_correction: int


class FeedbackOut(BaseModel):
    id: str
    message_id: str
    rating: str
    comment: str
    corrected_answer: str | None
