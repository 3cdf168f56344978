"""Evaluation runs (usecases/evals.py): create (as Celery jobs), list, read with progress and
metrics, items, cancel, delete, compare two runs, a sweep's table and plot, apply a variant."""

from __future__ import annotations

import uuid
from typing import Literal

from fastapi import APIRouter, Query, Response

from api.deps import CurrentTenant, StateDep
from api.schemas.evals import ApplyOut, CompareOut, EstimateOut, EvalItemOut, SweepOut
from core.models import JobStatus
from evals.service import EvalCreate
from evals.sweep import plot
from usecases import evals
from usecases.evals import ApplyBody, EvalOut

router = APIRouter(prefix="/v1/evals", tags=["evals"])


@router.post("", status_code=202, response_model=EvalOut)
def create_eval(body: EvalCreate, state: StateDep, tenant: CurrentTenant) -> EvalOut:
    """Queue an evaluation run (retrieval, answer or agent)."""
    return evals.create_eval(state, tenant, body)


@router.post("/estimate", response_model=EstimateOut)
def estimate_eval(body: EvalCreate, state: StateDep, tenant: CurrentTenant) -> dict:
    """What a run with this body would evaluate and, with a judge, its estimated judging tokens;
    creates nothing."""
    return evals.estimate_eval(state, tenant, body)


@router.get("", response_model=list[EvalOut])
def list_evals(
    state: StateDep,
    tenant: CurrentTenant,
    kind: str | None = None,
    status: JobStatus | None = None,
    limit: int = Query(default=50, ge=1, le=500),
) -> list[EvalOut]:
    return evals.list_evals(state, tenant, kind, status, limit)


@router.get("/{run_id}", response_model=EvalOut)
def read_eval(run_id: uuid.UUID, state: StateDep, tenant: CurrentTenant) -> EvalOut:
    return evals.read_eval(state, tenant, run_id)


@router.get("/{run_id}/items", response_model=list[EvalItemOut])
def list_items(
    run_id: uuid.UUID,
    state: StateDep,
    tenant: CurrentTenant,
    variant: str | None = None,
    limit: int = Query(default=100, ge=1, le=1000),
    offset: int = Query(default=0, ge=0, le=10_000_000),
) -> list[dict]:
    """Per-item results: query, output (ranked ids with scores, or answer and citations), metrics."""
    return evals.list_items(state, tenant, run_id, variant, limit, offset)


@router.post("/{run_id}/cancel", response_model=EvalOut)
def cancel_eval(run_id: uuid.UUID, state: StateDep, tenant: CurrentTenant) -> EvalOut:
    """Stop the run after the item in flight; finished items and their metrics stay."""
    return evals.cancel_eval(state, tenant, run_id)


@router.delete("/{run_id}", status_code=204)
def delete_eval(run_id: uuid.UUID, state: StateDep, tenant: CurrentTenant) -> Response:
    evals.delete_eval(state, tenant, run_id)
    return Response(status_code=204)


@router.get("/{run_id}/compare/{other_id}", response_model=CompareOut)
def compare_evals(
    run_id: uuid.UUID,
    other_id: uuid.UUID,
    state: StateDep,
    tenant: CurrentTenant,
    variant: str | None = None,
    other_variant: str | None = None,
) -> dict:
    """Metric deltas (other - this), per-item wins and losses, paired tests on the main metric."""
    return evals.compare_evals(state, tenant, run_id, other_id, variant, other_variant)


@router.get("/{run_id}/sweep", response_model=SweepOut)
def read_sweep(run_id: uuid.UUID, state: StateDep, tenant: CurrentTenant) -> dict:
    """Quality vs latency per variant, with the Pareto front flagged (the plot's data)."""
    return evals.read_sweep(state, tenant, run_id)[1]


@router.get(
    "/{run_id}/sweep/plot",
    response_class=Response,
    responses={200: {"content": {"image/png": {}, "image/svg+xml": {"schema": {"type": "string"}}}}},
)
def sweep_plot(
    run_id: uuid.UUID, state: StateDep, tenant: CurrentTenant, format: Literal["png", "svg"] = "png"
) -> Response:
    title, table = evals.read_sweep(state, tenant, run_id)
    media = "image/png" if format == "png" else "image/svg+xml"
    return Response(plot(table, format, title=title), media_type=media)


@router.post("/{run_id}/apply", response_model=ApplyOut)
def apply_eval(run_id: uuid.UUID, body: ApplyBody, state: StateDep, tenant: CurrentTenant) -> dict:
    """Write a variant's retrieval settings into a collection's retrieval config."""
    return evals.apply_eval(state, tenant, run_id, body)
