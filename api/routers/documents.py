"""Documents: upload (multipart, many files) into a job, list with status, read, delete, chunks."""

from __future__ import annotations

import json
import uuid
from datetime import datetime

from fastapi import APIRouter, File, Form, Query, Response, UploadFile
from pydantic import BaseModel, ConfigDict, Field, computed_field
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from api.deps import CurrentTenant, SessionDep, StateDep
from api.document_text import parsed_text
from api.scoping import get_in_tenant
from core.errors import ClientError
from core.models import Chunk, Document, DocumentStatus, IngestionJob
from core.quotas import check_quota, lock_usage
from ingestion.blobs import BlobStore
from ingestion.errors import is_retryable
from ingestion.state import release_from_job, requeue_documents
from ingestion.uploads import Upload, create_batch, send_job
from usecases.lookups import get_collection

router = APIRouter(prefix="/v1", tags=["documents"])


class UploadOutcomeOut(BaseModel):
    filename: str
    source_id: str
    status: str
    document_id: uuid.UUID | None
    version: int | None
    reason: str | None


class UploadOut(BaseModel):
    job_id: uuid.UUID
    documents: list[UploadOutcomeOut]


class DocumentOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    collection_id: uuid.UUID
    source_id: str
    title: str
    mime_type: str | None
    size_bytes: int
    content_hash: str
    status: DocumentStatus
    version: int
    error: str | None
    job_id: uuid.UUID | None
    attempts: int
    metadata: dict = Field(validation_alias="metadata_")
    created_at: datetime
    updated_at: datetime

    @computed_field
    @property
    def retryable(self) -> bool | None:
        """For a failed document: whether requeueing may succeed (false: the file itself is the cause)."""
        return is_retryable(self.error) if self.status == DocumentStatus.failed else None


class DocumentPage(BaseModel):
    total: int
    items: list[DocumentOut]


class ChunkOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    ordinal: int
    text: str
    token_count: int
    char_start: int
    char_end: int
    page: int | None
    heading_path: list
    metadata: dict = Field(validation_alias="metadata_")


class ChunkPage(BaseModel):
    total: int
    items: list[ChunkOut]


class ChunkSpan(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    ordinal: int
    char_start: int
    char_end: int
    page: int | None
    token_count: int
    heading_path: list


class DocumentText(BaseModel):
    text: str = Field(description="The parsed text as far as its chunks cover it.")
    uncovered_chars: int = Field(description="Characters between chunks, shown as spaces.")
    chunks: list[ChunkSpan]


def get_document(session: Session, tenant: uuid.UUID, document_id: uuid.UUID) -> Document:
    return get_in_tenant(session, tenant, Document, document_id, "document", "document_not_found")


@router.post("/collections/{collection}/documents", status_code=202, response_model=UploadOut)
def upload_documents(
    collection: str,
    session: SessionDep,
    state: StateDep,
    tenant: CurrentTenant,
    files: list[UploadFile] = File(..., description="One or more files."),
    metadata: str | None = Form(
        default=None, description="JSON object merged into each document's metadata."
    ),
):
    """Store the bytes, create one job for the batch, queue one task per new or changed document."""
    settings = state.settings
    row = get_collection(session, tenant, collection)
    if len(files) > settings.ingestion.max_files_per_upload:
        raise ClientError(
            413, "too_many_files", f"at most {settings.ingestion.max_files_per_upload} files per upload"
        )
    try:
        extra = json.loads(metadata) if metadata else {}
    except ValueError as exc:
        raise ClientError(422, "invalid_metadata", f"metadata is not valid JSON: {exc}") from None
    if not isinstance(extra, dict):
        raise ClientError(422, "invalid_metadata", "metadata must be a JSON object")
    if any(not file.filename for file in files):
        raise ClientError(422, "missing_filename", "every uploaded file needs a file name")
    max_bytes = int(settings.ingestion.max_file_mb * 1e6)
    blobs = BlobStore.for_data_dir(settings.data_dir)
    # NOTE: each file goes from the request's spool file to the blob store in 1 MB pieces (at most
    # max_bytes + 1 bytes are read; anything longer is rejected as too large): none is held whole.
    uploads = [
        Upload(f.filename, metadata=dict(extra), size=f.size, staged=blobs.put_stream(f.file, max_bytes))
        for f in files
    ]
    try:
        lock_usage(session, tenant)
        batch = create_batch(session, blobs, row, uploads, max_bytes)
        if batch.queued:  # what the batch stores counts: rejected, unchanged and duplicate files do not
            check_quota(session, tenant, settings.limits, settings.data_dir)
        session.commit()
    except BaseException:
        for upload in uploads:
            blobs.delete(upload.staged.key)
        raise
    for key in batch.stale_blobs:
        blobs.delete(key)
    send_job(state.celery, state.sessions, settings, batch.job.id, batch.queued, batch.sizes)
    return UploadOut(job_id=batch.job.id, documents=[UploadOutcomeOut(**vars(o)) for o in batch.outcomes])


@router.get("/collections/{collection}/documents", response_model=DocumentPage)
def list_documents(
    collection: str,
    session: SessionDep,
    tenant: CurrentTenant,
    status: DocumentStatus | None = None,
    job_id: uuid.UUID | None = None,
    source_id: str | None = Query(default=None, description="Exact source id."),
    q: str | None = Query(default=None, description="Substring of the source id or title."),
    limit: int = Query(default=100, ge=1, le=1000),
    offset: int = Query(default=0, ge=0, le=10_000_000),
):
    row = get_collection(session, tenant, collection)
    query = select(Document).where(Document.collection_id == row.id)
    if status is not None:
        query = query.where(Document.status == status)
    if job_id is not None:
        query = query.where(Document.job_id == job_id)
    if source_id is not None:
        query = query.where(Document.source_id == source_id)
    if q:
        pattern = f"%{q}%"
        query = query.where(Document.source_id.ilike(pattern) | Document.title.ilike(pattern))
    total = session.execute(select(func.count()).select_from(query.subquery())).scalar_one()
    docs = session.execute(
        query.order_by(Document.created_at, Document.id).limit(limit).offset(offset)
    ).scalars()
    return DocumentPage(total=total, items=[DocumentOut.model_validate(d) for d in docs])


@router.get("/documents/{document_id}", response_model=DocumentOut)
def read_document(document_id: uuid.UUID, session: SessionDep, tenant: CurrentTenant):
    return DocumentOut.model_validate(get_document(session, tenant, document_id))


@router.delete("/documents/{document_id}", status_code=204)
def delete_document(document_id: uuid.UUID, session: SessionDep, state: StateDep, tenant: CurrentTenant):
    """Deletes the document and its chunks (FK cascade) in one transaction."""
    doc = session.get(Document, get_document(session, tenant, document_id).id, with_for_update=True)
    key = doc.blob_key
    release_from_job(session, doc)
    session.delete(doc)
    session.commit()
    BlobStore.for_data_dir(state.settings.data_dir).delete(key)
    return Response(status_code=204)


@router.get("/documents/{document_id}/chunks", response_model=ChunkPage)
def list_chunks(
    document_id: uuid.UUID,
    session: SessionDep,
    tenant: CurrentTenant,
    limit: int = Query(default=100, ge=1, le=1000),
    offset: int = Query(default=0, ge=0, le=10_000_000),
):
    doc = get_document(session, tenant, document_id)
    total = session.execute(select(func.count()).where(Chunk.document_id == doc.id)).scalar_one()
    chunks = session.execute(
        select(Chunk).where(Chunk.document_id == doc.id).order_by(Chunk.ordinal).limit(limit).offset(offset)
    ).scalars()
    return ChunkPage(total=total, items=[ChunkOut.model_validate(c) for c in chunks])


@router.get("/documents/{document_id}/text", response_model=DocumentText)
def read_document_text(document_id: uuid.UUID, session: SessionDep, tenant: CurrentTenant):
    """The parsed text with every chunk's span, page and token count."""
    parsed = parsed_text(session, get_document(session, tenant, document_id).id)
    return DocumentText(
        text=parsed.text,
        uncovered_chars=parsed.uncovered_chars,
        chunks=[ChunkSpan.model_validate(c) for c in parsed.chunks],
    )


@router.post("/documents/{document_id}/requeue", status_code=202, response_model=DocumentOut)
def requeue_document(document_id: uuid.UUID, session: SessionDep, state: StateDep, tenant: CurrentTenant):
    """Ingest a failed document again from its stored upload (its job reopens)."""
    doc = get_document(session, tenant, document_id)
    if doc.status != DocumentStatus.failed or doc.job_id is None:
        raise ClientError(
            409, "not_failed", f"only failed documents can be re-queued; this one is {doc.status}"
        )
    if not doc.blob_key:
        raise ClientError(409, "upload_missing", "the uploaded bytes are gone; upload the file again")
    ids = requeue_documents(session, doc.job_id, [doc.id])
    # The outbox: if this send fails, the reaper sends the job.
    session.get(IngestionJob, doc.job_id).enqueued_at = None
    session.commit()
    queued = DocumentOut.model_validate(doc)  # read before sending: a worker may start on it at once
    send_job(state.celery, state.sessions, state.settings, doc.job_id, ids)
    return queued
