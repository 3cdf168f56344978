"""Evaluation runs: the use case behind `/v1/evals` (api/routers/evals.py).

Create (queued as a Celery job once committed), estimate, list, read, items, cancel, delete,
compare two runs, a sweep's table, apply a variant to a collection. Each function takes the
platform and the tenant, owns its session (scoped to the tenant) and commits before returning;
the evaluation itself is evals/ (service.py for runs, runner.py on the worker).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from pydantic import BaseModel, ConfigDict
from sqlalchemy import select
from sqlalchemy.orm import Session

from core.errors import ClientError
from core.models import EvalItem, EvalRun, JobStatus
from core.tenancy import scope_to_tenant
from evals import datasets, service
from evals.tasks import send_run
from usecases.lookups import get_collection
from usecases.platform import Platform

ITEM_FIELDS = (
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


@contextmanager
def _tenant_session(platform: Platform, tenant: uuid.UUID) -> Iterator[Session]:
    with platform.sessions() as session:
        scope_to_tenant(session, tenant)
        yield session


def _run(session: Session, tenant: uuid.UUID, run_id: uuid.UUID) -> EvalRun:
    run = service.get_run(session, tenant, run_id)
    if run is None:
        raise ClientError(404, "eval_not_found", f"no evaluation run {run_id}")
    return run


def _sweep(run: EvalRun) -> dict:
    table = run.metrics.get("sweep")
    if table is None:
        raise ClientError(409, "no_sweep", "the run has no finished sweep (it needs several variants)")
    return table


def create_eval(platform: Platform, tenant: uuid.UUID, body: service.EvalCreate) -> EvalOut:
    """Queue a run (retrieval, answer or agent); 404 for an unknown dataset or collection, 422 for
    a body the service refuses."""
    with _tenant_session(platform, tenant) as session:
        collection = get_collection(session, tenant, body.collection) if body.collection else None
        try:
            run = service.create_run(session, platform.settings, tenant, body, collection)
        except datasets.DatasetNotFound as exc:
            raise ClientError(404, "dataset_not_found", str(exc)) from None
        except service.EvalInputError as exc:
            raise ClientError(422, "invalid_eval", str(exc)) from None
        session.commit()  # NOTE: before the job is sent: a worker must find the row
        out = _out(run)
    send_run(platform.celery, platform.settings, out.id)
    return out


def estimate_eval(platform: Platform, tenant: uuid.UUID, body: service.EvalCreate) -> dict:
    """What a run with this body would evaluate (and its judging tokens); creates nothing."""
    try:
        return service.estimate(platform.settings, tenant, body)
    except datasets.DatasetNotFound as exc:
        raise ClientError(404, "dataset_not_found", str(exc)) from None
    except service.EvalInputError as exc:
        raise ClientError(422, "invalid_eval", str(exc)) from None


def list_evals(
    platform: Platform, tenant: uuid.UUID, kind: str | None, status: JobStatus | None, limit: int
) -> list[EvalOut]:
    query = select(EvalRun).where(EvalRun.tenant_id == tenant)
    if kind:
        query = query.where(EvalRun.kind == kind)
    if status:
        query = query.where(EvalRun.status == status)
    with _tenant_session(platform, tenant) as session:
        return [_out(r) for r in session.scalars(query.order_by(EvalRun.created_at.desc()).limit(limit))]


def read_eval(platform: Platform, tenant: uuid.UUID, run_id: uuid.UUID) -> EvalOut:
    with _tenant_session(platform, tenant) as session:
        return _out(_run(session, tenant, run_id))


def list_items(
    platform: Platform, tenant: uuid.UUID, run_id: uuid.UUID, variant: str | None, limit: int, offset: int
) -> list[dict]:
    """Per-item results, in the order they were evaluated."""
    with _tenant_session(platform, tenant) as session:
        run = _run(session, tenant, run_id)
        query = select(EvalItem).where(EvalItem.run_id == run.id)
        if variant:
            query = query.where(EvalItem.variant == variant)
        query = query.order_by(EvalItem.created_at, EvalItem.item_key).offset(offset).limit(limit)
        return [{f: getattr(r, f) for f in ITEM_FIELDS} for r in session.scalars(query)]


def cancel_eval(platform: Platform, tenant: uuid.UUID, run_id: uuid.UUID) -> EvalOut:
    """The worker stops after the item in flight; 409 for a finished run."""
    with _tenant_session(platform, tenant) as session:
        run = _run(session, tenant, run_id)
        if run.status not in (JobStatus.queued, JobStatus.running):
            raise ClientError(409, "eval_finished", f"the run is already {run.status.value}")
        run.status, run.error = JobStatus.cancelled, "cancelled"
        session.commit()
        return _out(run)


def delete_eval(platform: Platform, tenant: uuid.UUID, run_id: uuid.UUID) -> None:
    with _tenant_session(platform, tenant) as session:
        service.delete_run(session, _run(session, tenant, run_id))
        session.commit()


def compare_evals(
    platform: Platform,
    tenant: uuid.UUID,
    run_id: uuid.UUID,
    other_id: uuid.UUID,
    variant: str | None,
    other_variant: str | None,
) -> dict:
    with _tenant_session(platform, tenant) as session:
        a, b = _run(session, tenant, run_id), _run(session, tenant, other_id)
        try:
            return service.compare_runs(session, a, b, variant, other_variant)
        except service.EvalInputError as exc:
            raise ClientError(409, "not_comparable", str(exc)) from None


def read_sweep(platform: Platform, tenant: uuid.UUID, run_id: uuid.UUID) -> tuple[str, dict]:
    """The run's title and its sweep table (409 without one)."""
    with _tenant_session(platform, tenant) as session:
        run = _run(session, tenant, run_id)
        return run.name or f"sweep {run.id}", _sweep(run)


def apply_eval(platform: Platform, tenant: uuid.UUID, run_id: uuid.UUID, body: ApplyBody) -> dict:
    """Write a variant's retrieval settings into a collection's retrieval config."""
    with _tenant_session(platform, tenant) as session:
        run = _run(session, tenant, run_id)
        ref = body.collection or (str(run.collection_id) if run.collection_id else None)
        if ref is None:
            raise ClientError(
                422, "invalid_apply", "the run's collection is gone: name the collection to apply to"
            )
        if not body.collection and run.config.get("throwaway_collection"):
            raise ClientError(
                422, "invalid_apply", "the run's collection was a throwaway one: name a collection"
            )
        collection = get_collection(session, tenant, ref)
        try:
            applied = service.apply_variant(session, run, body.variant, collection)
        except service.EvalInputError as exc:
            raise ClientError(422, "invalid_apply", str(exc)) from None
        session.commit()
        return {"collection_id": str(collection.id), **applied}
