"""Creating, reading and comparing runs: what the API and CLI need, without HTTP."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, Field
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from core.models import Collection, EvalItem, EvalRun, JobStatus
from core.settings import Settings
from evals import datasets as ds
from evals.compare import compare
from evals.judge import SENTENCES_PER_ANSWER, estimate_tokens
from evals.metrics import MAIN_METRIC
from evals.sweep import expand_grid
from retrieval.config import deep_merge, resolve_config


class EvalInputError(ValueError):
    """A request that cannot become a run (the API answers 4xx with this message)."""


class DatasetRef(BaseModel):
    path: str = Field(description="Relative to <data_dir>/evals/ (an upload's path, or a folder put there).")
    format: Literal["beir", "jsonl", "pubmedqa", "bfcl"] = "beir"
    split: str = Field(
        default="test", description="qrels/<split>.tsv; pubmedqa: test or all; bfcl: the category."
    )


class Generation(BaseModel):
    max_tokens: int | None = Field(default=None, ge=1, le=4096)
    temperature: float = Field(default=0.0, ge=0, le=2)
    seed: int = 0


class Judge(BaseModel):
    """Model-judged faithfulness of answers (evals/judge.py): costs generator tokens, see estimate."""

    repeats: int = Field(default=3, ge=1, le=10, description="Times each answer is judged (variance).")
    temperature: float = Field(default=0.7, ge=0, le=2, description="Sampling temperature of the judge.")


class EvalCreate(BaseModel):
    kind: Literal["retrieval", "answer", "agent"]
    name: str = Field(default="", max_length=200)
    dataset: DatasetRef
    collection: str | None = Field(
        default=None,
        description="An existing collection (id or name) to evaluate; with a corpus in the dataset, "
        "missing documents are added to it. Unset: a throwaway collection holds the corpus.",
    )
    collection_name: str | None = Field(
        default=None,
        max_length=200,
        description="Ingest the corpus into a new collection of this name and keep it.",
    )
    ingest: bool = Field(default=True, description="Add the dataset's corpus to the collection.")
    retrieval: dict[str, Any] = Field(
        default_factory=dict, description="Retrieval overrides (RetrievalConfig shape)."
    )
    sweep: dict[str, list[Any]] = Field(
        default_factory=dict,
        description='Retrieval settings to sweep, dotted keys: {"fusion.method": ["rrf", "convex"], '
        '"dense.candidates": [100, 300]}; every combination is one variant.',
    )
    generation: Generation = Field(default_factory=Generation)
    max_items: int | None = Field(default=None, ge=1, description="Evaluate only the first N items.")
    judge: Judge | None = Field(
        default=None, description="Answer runs: also judge faithfulness with the generator (model-judged)."
    )


def create_run(
    session: Session, settings: Settings, tenant: uuid.UUID, body: EvalCreate, collection: Collection | None
) -> EvalRun:
    if body.dataset.format not in ds.FORMATS[body.kind]:
        raise EvalInputError(f"a {body.kind} run takes a dataset in {', '.join(ds.FORMATS[body.kind])}")
    if body.judge is not None and body.kind != "answer":
        raise EvalInputError("judge applies to answer runs only")
    if body.kind == "agent" and (collection or body.collection_name or body.retrieval or body.sweep):
        raise EvalInputError("an agent run uses each case's own functions: no collection, retrieval or sweep")
    try:
        path = ds.resolve_path(settings.data_dir, body.dataset.path, tenant)
        if body.kind == "agent":
            ds.load_agent(path, body.dataset.split)  # a missing category is a 4xx now, not a failed run
        variants = expand_grid(body.retrieval, body.sweep)
        for variant in variants:
            resolve_config(settings.retrieval, variant["overrides"])
    except ds.DatasetNotFound:
        raise
    except ValueError as exc:
        raise EvalInputError(ds.public_reason(str(exc), settings.data_dir)) from None
    if body.collection_name and collection is not None:
        raise EvalInputError("give collection or collection_name, not both")
    if body.collection_name and session.scalar(
        select(Collection.id).where(Collection.tenant_id == tenant, Collection.name == body.collection_name)
    ):
        raise EvalInputError(f"a collection named {body.collection_name!r} already exists")
    run = EvalRun(
        tenant_id=tenant,
        name=body.name,
        kind=body.kind,
        status=JobStatus.queued,
        collection_id=collection.id if collection else None,
        dataset=body.dataset.model_dump(),
        config={
            "variants": variants,
            "ingest": body.ingest,
            "collection_name": body.collection_name,
            "generation": body.generation.model_dump(),
            "max_items": body.max_items,
            "judge": body.judge.model_dump() if body.judge else None,
            "estimate": estimate(settings, tenant, body),
        },
        progress={"stage": "queued"},
        metrics={},
    )
    run.items_total = run.items_done = run.attempts = 0
    session.add(run)
    session.flush()
    return run


def estimate(settings: Settings, tenant: uuid.UUID, body: EvalCreate) -> dict:
    """What a run will evaluate and, with a judge, roughly how many generator tokens judging costs
    (shown before the run starts: POST /v1/evals/estimate, and kept in the run's config)."""
    try:
        variants = len(expand_grid(body.retrieval, body.sweep))
        if body.kind != "answer":
            return {"variants": variants}
        path = ds.resolve_path(settings.data_dir, body.dataset.path, tenant)
        items = len(ds.load_answers(path, body.dataset.format, body.dataset.split).items)
    except ds.DatasetNotFound:
        raise
    except (ValueError, KeyError, TypeError) as exc:  # a malformed sweep or dataset: the caller's to fix
        message = str(exc) if isinstance(exc, ValueError) else f"malformed dataset: {exc!r}"
        raise EvalInputError(ds.public_reason(message, settings.data_dir)) from None
    items = min(items, body.max_items or items)
    out = {"variants": variants, "items": items * variants}
    if body.judge is not None:
        out["judge_verdicts"] = items * variants * body.judge.repeats * SENTENCES_PER_ANSWER
        out["judge_tokens"] = variants * estimate_tokens(items, body.judge.repeats)
    return out


def get_run(session: Session, tenant: uuid.UUID, run_id: uuid.UUID) -> EvalRun | None:
    """The run if it belongs to the tenant (another tenant's run is not found)."""
    return session.scalar(select(EvalRun).where(EvalRun.id == run_id, EvalRun.tenant_id == tenant))


def delete_run(session: Session, run: EvalRun) -> None:
    """Delete the run, its items and its throwaway collection (a worker holding it stops)."""
    throwaway = run.config.get("throwaway_collection")
    session.delete(run)
    if throwaway:
        session.execute(delete(Collection).where(Collection.id == uuid.UUID(throwaway)))


def item_metrics(session: Session, run: EvalRun, variant: str) -> dict[str, dict]:
    rows = session.execute(
        select(EvalItem.item_key, EvalItem.metrics).where(
            EvalItem.run_id == run.id, EvalItem.variant == variant
        )
    )
    return {key: metrics for key, metrics in rows}


def main_variant(run: EvalRun) -> str:
    return run.config["variants"][0]["label"]


def _dataset_key(run: EvalRun) -> tuple:
    d = run.dataset or {}
    return d.get("path"), d.get("format", "beir"), d.get("split", "test")


def compare_runs(
    session: Session, a: EvalRun, b: EvalRun, variant_a: str | None, variant_b: str | None
) -> dict:
    if a.kind != b.kind:
        raise EvalInputError(f"cannot compare a {a.kind} run with a {b.kind} run")
    va, vb = variant_a or main_variant(a), variant_b or main_variant(b)
    metrics_a, metrics_b = a.metrics.get("variants", {}).get(va), b.metrics.get("variants", {}).get(vb)
    if metrics_a is None or metrics_b is None:
        raise EvalInputError("both runs must have finished (and have the variants asked for)")
    items_a, items_b = item_metrics(session, a, va), item_metrics(session, b, vb)
    # NOTE: the same files uploaded twice (the CLI uploads a folder per command) sit at two paths and
    # share their items; runs on different datasets share none, and their deltas would compare nothing.
    if _dataset_key(a) != _dataset_key(b) and not items_a.keys() & items_b.keys():
        raise EvalInputError(
            f"the runs evaluated different datasets ({a.dataset.get('path')} and {b.dataset.get('path')})"
        )
    result = compare(metrics_a, metrics_b, items_a, items_b, MAIN_METRIC[a.kind])
    return {"a": {"id": str(a.id), "variant": va}, "b": {"id": str(b.id), "variant": vb}, **result}


def apply_variant(session: Session, run: EvalRun, variant: str | None, collection: Collection) -> dict:
    """Write a variant's retrieval settings into the collection's retrieval config (deep-merged)."""
    label = variant or run.metrics.get("sweep", {}).get("best") or main_variant(run)
    found = [v for v in run.config["variants"] if v["label"] == label]
    if not found:
        raise EvalInputError(f"the run has no variant {label!r}")
    collection.retrieval = deep_merge(collection.retrieval or {}, found[0]["overrides"])
    return {"variant": label, "retrieval": collection.retrieval}
