"""Collections: CRUD with their chunking and embedding settings."""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from api.deps import CurrentTenant, SessionDep, SettingsDep, StateDep
from core.errors import ClientError
from core.models import Chunk, Collection, Document
from core.registry import ModelNotAvailable
from core.settings import Settings
from ingestion import collections as service
from ingestion.blobs import BlobStore
from ingestion.chunking import ChunkingConfig
from retrieval.config import resolve_config
from usecases.lookups import get_collection
from usecases.validation import check_model_allowed

router = APIRouter(prefix="/v1/collections", tags=["collections"])
log = logging.getLogger(__name__)


class CollectionCreate(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    description: str = ""
    embedding_model: str | None = Field(default=None, description="Model spec (default: settings).")
    index_dim: int | None = Field(default=None, description="Matryoshka prefix the HNSW index covers.")
    chunking: ChunkingConfig | None = None


class CollectionUpdate(BaseModel):
    description: str | None = None
    embedding_model: str | None = Field(default=None, description="Only while the collection is empty.")
    index_dim: int | None = Field(default=None, description="Rebuilds the index from stored vectors.")
    chunking: ChunkingConfig | None = Field(default=None, description="Applies to documents ingested later.")
    retrieval: dict[str, Any] | None = Field(
        default=None,
        description="Search settings (partial RetrievalConfig shape), replacing the stored ones; {} resets.",
    )


class CollectionOut(BaseModel):
    id: uuid.UUID
    name: str
    description: str
    embedding_model: str
    embedding_dim: int
    index_dim: int
    chunking: dict
    retrieval: dict = {}
    created_at: datetime
    updated_at: datetime
    document_count: int = 0
    chunk_count: int = 0


def _model_unavailable(spec: str | None) -> ClientError:
    # NOTE: the loader's message may name server paths; it goes to the log only.
    log.warning("model %r cannot be loaded", spec, exc_info=True)
    return ClientError(422, "model_not_available", f"model {spec!r} cannot be loaded on this server")


def _build_index(engine, collection_id: uuid.UUID, index_dim: int) -> None:
    try:
        service.build_prefix_index(engine, collection_id, index_dim)
    except Exception:
        log.warning(
            "prefix index of collection %s not built; searches stay exact", collection_id, exc_info=True
        )


def _out(session: Session, collection: Collection) -> CollectionOut:
    docs = session.execute(select(func.count()).where(Document.collection_id == collection.id)).scalar_one()
    chunks = session.execute(select(func.count()).where(Chunk.collection_id == collection.id)).scalar_one()
    fields = {n: getattr(collection, n) for n in CollectionOut.model_fields if hasattr(collection, n)}
    return CollectionOut(**fields, document_count=docs, chunk_count=chunks)


def default_chunking(settings: Settings) -> ChunkingConfig:
    knobs = settings.ingestion
    return ChunkingConfig(
        strategy=knobs.chunk_strategy,
        chunk_size=knobs.chunk_size_tokens,
        chunk_overlap=knobs.chunk_overlap_tokens,
    )


@router.post("", status_code=201, response_model=CollectionOut)
def create_collection(
    body: CollectionCreate, session: SessionDep, settings: SettingsDep, state: StateDep, tenant: CurrentTenant
):
    check_model_allowed(settings, body.embedding_model, "embedding model")
    exists = session.execute(
        select(Collection.id).where(Collection.tenant_id == tenant, Collection.name == body.name)
    ).first()
    if exists:
        raise ClientError(409, "collection_exists", f"a collection named {body.name!r} already exists")
    try:
        collection = service.create_collection(
            session,
            tenant,
            body.name,
            models=state.models,
            embedding_model=body.embedding_model or settings.embedding_model,
            chunking=body.chunking or default_chunking(settings),
            index_dim=body.index_dim or settings.ingestion.index_dim,
            description=body.description,
        )
    except ModelNotAvailable:
        raise _model_unavailable(body.embedding_model) from None
    except ValueError as exc:
        raise ClientError(422, "invalid_collection", str(exc)) from None
    except IntegrityError:
        raise ClientError(
            409, "collection_exists", f"a collection named {body.name!r} already exists"
        ) from None
    session.commit()
    # NOTE: in the background: CREATE INDEX CONCURRENTLY waits for every older transaction of the
    # database to end (a long answer, a model load), and the collection is usable meanwhile (its
    # searches run exact until the index exists).
    threading.Thread(
        target=_build_index, args=(state.engine, collection.id, collection.index_dim), daemon=True
    ).start()
    return _out(session, collection)


@router.get("", response_model=list[CollectionOut])
def list_collections(session: SessionDep, tenant: CurrentTenant):
    rows = session.execute(select(Collection).where(Collection.tenant_id == tenant).order_by(Collection.name))
    return [_out(session, c) for c in rows.scalars()]


@router.get("/{collection}", response_model=CollectionOut)
def read_collection(collection: str, session: SessionDep, tenant: CurrentTenant):
    return _out(session, get_collection(session, tenant, collection))


@router.patch("/{collection}", response_model=CollectionOut)
def update_collection(
    collection: str, body: CollectionUpdate, session: SessionDep, state: StateDep, tenant: CurrentTenant
):
    row = get_collection(session, tenant, collection)
    check_model_allowed(state.settings, body.embedding_model, "embedding model")
    if body.retrieval is not None:
        try:
            resolve_config(state.settings.retrieval, body.retrieval)
        except ValueError as exc:
            raise ClientError(422, "invalid_retrieval", f"invalid retrieval settings: {exc}") from None
    try:
        if body.embedding_model is not None and service.check_model_change(
            session, row, body.embedding_model, state.models
        ):
            session.commit()
            service.drop_prefix_index(state.engine, row.id)
            service.build_prefix_index(state.engine, row.id, row.index_dim)
        if body.index_dim is not None and body.index_dim != row.index_dim:
            service.resolve_index_dim(body.index_dim, row.embedding_dim)
            service.drop_prefix_index(state.engine, row.id)
            service.change_index_dim(session, row, body.index_dim)
            session.commit()
            service.build_prefix_index(state.engine, row.id, row.index_dim)
    except service.CollectionConflict as exc:
        raise ClientError(409, "embedding_model_conflict", str(exc)) from None
    except ModelNotAvailable:
        raise _model_unavailable(body.embedding_model) from None
    except ValueError as exc:
        raise ClientError(422, "invalid_collection", str(exc)) from None
    if body.description is not None:
        row.description = body.description
    if body.chunking is not None:
        row.chunking = body.chunking.model_dump()
    if body.retrieval is not None:
        row.retrieval = body.retrieval
    session.flush()
    return _out(session, row)


@router.delete("/{collection}", status_code=204)
def delete_collection(collection: str, session: SessionDep, state: StateDep, tenant: CurrentTenant):
    row = get_collection(session, tenant, collection)
    keys = (
        session.execute(
            select(Document.blob_key).where(Document.collection_id == row.id, Document.blob_key.is_not(None))
        )
        .scalars()
        .all()
    )
    row_id = row.id
    session.delete(row)
    session.commit()
    service.drop_prefix_index(state.engine, row_id)
    blobs = BlobStore.for_data_dir(state.settings.data_dir)
    for key in keys:
        blobs.delete(key)
    return Response(status_code=204)
