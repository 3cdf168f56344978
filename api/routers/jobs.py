"""Ingestion jobs: progress, and the admin actions re-queue and cancel."""

from __future__ import annotations

import uuid
from datetime import datetime

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from api.deps import CurrentTenant, SessionDep, StateDep
from api.scoping import get_in_tenant
from core.errors import ClientError
from core.models import Collection, Document, IngestionJob, JobStatus
from ingestion import state as transitions
from ingestion.uploads import send_job
from usecases.lookups import get_collection

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


class JobOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    collection_id: uuid.UUID
    status: JobStatus
    documents_total: int
    documents_done: int
    documents_failed: int
    chunks_embedded: int
    progress: float = 0.0
    documents_by_status: dict[str, int] = {}
    stages: dict
    attempts: int
    heartbeat_at: datetime | None
    error: str | None
    created_at: datetime
    updated_at: datetime


def job_out(session: Session, job: IngestionJob) -> JobOut:
    counts = session.execute(
        select(Document.status, func.count()).where(Document.job_id == job.id).group_by(Document.status)
    ).all()
    finished = job.documents_done + job.documents_failed
    progress = finished / job.documents_total if job.documents_total else 1.0
    return JobOut.model_validate(job).model_copy(
        update={"progress": round(progress, 4), "documents_by_status": {s.value: n for s, n in counts}}
    )


def get_job(session: Session, tenant: uuid.UUID, job_id: uuid.UUID) -> IngestionJob:
    return get_in_tenant(session, tenant, IngestionJob, job_id, "ingestion job", "job_not_found")


@router.get("", response_model=list[JobOut])
def list_jobs(
    session: SessionDep,
    tenant: CurrentTenant,
    collection: str | None = None,
    status: JobStatus | None = None,
    failures: bool | None = Query(
        default=None, description="true: only jobs with failed documents (also succeeded ones); false: none"
    ),
    limit: int = Query(default=50, ge=1, le=500),
):
    query = select(IngestionJob).join(Collection, Collection.id == IngestionJob.collection_id)
    query = query.where(Collection.tenant_id == tenant)
    if collection is not None:
        query = query.where(IngestionJob.collection_id == get_collection(session, tenant, collection).id)
    if status is not None:
        query = query.where(IngestionJob.status == status)
    if failures is not None:
        query = query.where((IngestionJob.documents_failed > 0) == failures)
    jobs = session.execute(query.order_by(IngestionJob.created_at.desc()).limit(limit)).scalars()
    return [job_out(session, j) for j in jobs]


@router.get("/{job_id}", response_model=JobOut)
def read_job(job_id: uuid.UUID, session: SessionDep, tenant: CurrentTenant):
    return job_out(session, get_job(session, tenant, job_id))


@router.post("/{job_id}/requeue", status_code=202, response_model=JobOut)
def requeue_job(job_id: uuid.UUID, session: SessionDep, state: StateDep, tenant: CurrentTenant):
    """Queue again every document of the job that is not indexed (failed, stuck or cancelled ones)."""
    job = get_job(session, tenant, job_id)
    document_ids = transitions.requeue_documents(session, job.id)
    if not document_ids:
        raise ClientError(409, "nothing_to_requeue", "every document of this job is indexed")
    job.enqueued_at = None
    session.commit()
    send_job(state.celery, state.sessions, state.settings, job.id, document_ids)
    session.refresh(job)
    return job_out(session, job)


@router.post("/{job_id}/cancel", response_model=JobOut)
def cancel_job(job_id: uuid.UUID, session: SessionDep, tenant: CurrentTenant):
    """Fail the job's unfinished documents (reason: cancelled); indexed ones stay."""
    job = get_job(session, tenant, job_id)
    if job.status not in transitions.JOB_OPEN:
        raise ClientError(409, "job_finished", f"the job is already {job.status.value}")
    transitions.cancel_job(session, job.id)
    session.commit()
    return job_out(session, job)
