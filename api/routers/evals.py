"""Evaluation runs: create (as Celery jobs), list, read with progress and metrics, items, cancel,
delete, compare two runs, a sweep's table and plot, and apply a variant to a collection."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, ConfigDict
from sqlalchemy import select

from api.deps import CurrentTenant, SessionDep, SettingsDep, StateDep
from api.schemas.evals import ApplyOut, CompareOut, EstimateOut, EvalItemOut, SweepOut
from core.errors import ClientError
from core.models import EvalItem, EvalRun, JobStatus
from evals import datasets, service
from evals.sweep import plot
from evals.tasks import send_run
from usecases.lookups import get_collection

router = APIRouter(prefix="/v1/evals", tags=["evals"])


class EvalOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    kind: str
    status: JobStatus
    collection_id: uuid.UUID | None
    dataset: dict
    config: dict
    progress: dict
    items_total: int
    items_done: int
    fraction_done: float = 0.0
    metrics: dict
    attempts: int
    error: str | None
    created_at: datetime
    updated_at: datetime


class ApplyBody(BaseModel):
    variant: str | None = None  # default: the sweep's best, else the run's only variant
    collection: str | None = None  # default: the run's collection


def _out(run: EvalRun) -> EvalOut:
    fraction = run.items_done / run.items_total if run.items_total else 0.0
    return EvalOut.model_validate(run).model_copy(update={"fraction_done": round(fraction, 4)})


def _run(session, tenant: uuid.UUID, run_id: uuid.UUID) -> EvalRun:
    run = service.get_run(session, tenant, run_id)
    if run is None:
        raise ClientError(404, "eval_not_found", f"no evaluation run {run_id}")
    return run


@router.post("", status_code=202, response_model=EvalOut)
def create_eval(
    body: service.EvalCreate,
    session: SessionDep,
    settings: SettingsDep,
    state: StateDep,
    tenant: CurrentTenant,
):
    """Queue an evaluation run (retrieval, answer or agent)."""
    collection = get_collection(session, tenant, body.collection) if body.collection else None
    try:
        run = service.create_run(session, settings, tenant, body, collection)
    except datasets.DatasetNotFound as exc:
        raise ClientError(404, "dataset_not_found", str(exc)) from None
    except service.EvalInputError as exc:
        raise ClientError(422, "invalid_eval", str(exc)) from None
    session.commit()
    send_run(state.celery, settings, run.id)
    return _out(run)


@router.post("/estimate", response_model=EstimateOut)
def estimate_eval(body: service.EvalCreate, settings: SettingsDep, tenant: CurrentTenant) -> dict:
    """What a run with this body would evaluate and, with a judge, its estimated judging tokens;
    creates nothing."""
    try:
        return service.estimate(settings, tenant, body)
    except datasets.DatasetNotFound as exc:
        raise ClientError(404, "dataset_not_found", str(exc)) from None
    except service.EvalInputError as exc:
        raise ClientError(422, "invalid_eval", str(exc)) from None


@router.get("", response_model=list[EvalOut])
def list_evals(
    session: SessionDep,
    tenant: CurrentTenant,
    kind: str | None = None,
    status: JobStatus | None = None,
    limit: int = Query(default=50, ge=1, le=500),
):
    query = select(EvalRun).where(EvalRun.tenant_id == tenant)
    if kind:
        query = query.where(EvalRun.kind == kind)
    if status:
        query = query.where(EvalRun.status == status)
    return [_out(r) for r in session.scalars(query.order_by(EvalRun.created_at.desc()).limit(limit))]


@router.get("/{run_id}", response_model=EvalOut)
def read_eval(run_id: uuid.UUID, session: SessionDep, tenant: CurrentTenant):
    return _out(_run(session, tenant, run_id))


@router.get("/{run_id}/items", response_model=list[EvalItemOut])
def list_items(
    run_id: uuid.UUID,
    session: SessionDep,
    tenant: CurrentTenant,
    variant: str | None = None,
    limit: int = Query(default=100, ge=1, le=1000),
    offset: int = Query(default=0, ge=0, le=10_000_000),
):
    """Per-item results: query, output (ranked ids with scores, or answer and citations), metrics."""
    run = _run(session, tenant, run_id)
    query = select(EvalItem).where(EvalItem.run_id == run.id)
    if variant:
        query = query.where(EvalItem.variant == variant)
    rows = session.scalars(query.order_by(EvalItem.created_at, EvalItem.item_key).offset(offset).limit(limit))
    fields = (
        "variant",
        "item_key",
        "query",
        "output",
        "metrics",
        "latency_ms",
        "tokens",
        "worker",
        "created_at",
    )
    return [{f: getattr(r, f) for f in fields} for r in rows]


@router.post("/{run_id}/cancel", response_model=EvalOut)
def cancel_eval(run_id: uuid.UUID, session: SessionDep, tenant: CurrentTenant):
    """Stop the run after the item in flight; finished items and their metrics stay."""
    run = _run(session, tenant, run_id)
    if run.status not in (JobStatus.queued, JobStatus.running):
        raise ClientError(409, "eval_finished", f"the run is already {run.status.value}")
    run.status, run.error = JobStatus.cancelled, "cancelled"
    session.commit()
    return _out(run)


@router.delete("/{run_id}", status_code=204)
def delete_eval(run_id: uuid.UUID, session: SessionDep, tenant: CurrentTenant):
    service.delete_run(session, _run(session, tenant, run_id))
    session.commit()
    return Response(status_code=204)


@router.get("/{run_id}/compare/{other_id}", response_model=CompareOut)
def compare_evals(
    run_id: uuid.UUID,
    other_id: uuid.UUID,
    session: SessionDep,
    tenant: CurrentTenant,
    variant: str | None = None,
    other_variant: str | None = None,
):
    """Metric deltas (other - this), per-item wins and losses, paired tests on the main metric."""
    a, b = _run(session, tenant, run_id), _run(session, tenant, other_id)
    try:
        return service.compare_runs(session, a, b, variant, other_variant)
    except service.EvalInputError as exc:
        raise ClientError(409, "not_comparable", str(exc)) from None


def _sweep(run: EvalRun) -> dict:
    table = run.metrics.get("sweep")
    if table is None:
        raise ClientError(409, "no_sweep", "the run has no finished sweep (it needs several variants)")
    return table


@router.get("/{run_id}/sweep", response_model=SweepOut)
def read_sweep(run_id: uuid.UUID, session: SessionDep, tenant: CurrentTenant):
    """Quality vs latency per variant, with the Pareto front flagged (the plot's data)."""
    return _sweep(_run(session, tenant, run_id))


@router.get(
    "/{run_id}/sweep/plot",
    response_class=Response,
    responses={200: {"content": {"image/png": {}, "image/svg+xml": {"schema": {"type": "string"}}}}},
)
def sweep_plot(
    run_id: uuid.UUID, session: SessionDep, tenant: CurrentTenant, format: Literal["png", "svg"] = "png"
):
    run = _run(session, tenant, run_id)
    media = "image/png" if format == "png" else "image/svg+xml"
    return Response(plot(_sweep(run), format, title=run.name or f"sweep {run.id}"), media_type=media)


@router.post("/{run_id}/apply", response_model=ApplyOut)
def apply_eval(run_id: uuid.UUID, body: ApplyBody, session: SessionDep, tenant: CurrentTenant):
    """Write a variant's retrieval settings into a collection's retrieval config."""
    run = _run(session, tenant, run_id)
    ref = body.collection or (str(run.collection_id) if run.collection_id else None)
    if ref is None:
        raise ClientError(
            422, "invalid_apply", "the run's collection is gone: name the collection to apply to"
        )
    if not body.collection and run.config.get("throwaway_collection"):
        raise ClientError(422, "invalid_apply", "the run's collection was a throwaway one: name a collection")
    collection = get_collection(session, tenant, ref)
    try:
        applied = service.apply_variant(session, run, body.variant, collection)
    except service.EvalInputError as exc:
        raise ClientError(422, "invalid_apply", str(exc)) from None
    session.commit()
    return {"collection_id": str(collection.id), **applied}
