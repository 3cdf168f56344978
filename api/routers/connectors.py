"""Connectors of a collection (web, git, folder): configure, schedule, sync now, sync history."""

from __future__ import annotations

import uuid
from datetime import datetime

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, Field, ValidationError
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from api.deps import CurrentTenant, SessionDep, StateDep
from core.connector_models import Connector, ConnectorSync, SyncStatus
from core.errors import ClientError
from core.models import Collection
from core.settings import Settings
from ingestion.connectors.base import SourceError
from ingestion.connectors.config import Kind, check_allowed, validate_config
from ingestion.connectors.sync import open_sync, send_sync
from usecases.lookups import get_collection

router = APIRouter(prefix="/v1", tags=["connectors"])


class ConnectorCreate(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    kind: Kind
    config: dict = Field(description="Per kind: see WebConfig, GitConfig, FolderConfig in the docs.")
    interval_s: int | None = Field(
        default=None, description="Re-sync every this many seconds (None: manual)."
    )
    enabled: bool = True


class ConnectorUpdate(BaseModel):
    config: dict | None = None
    interval_s: int | None = Field(default=None, description="0 turns the schedule off.")
    enabled: bool | None = None


class SyncOut(BaseModel):
    model_config = {"from_attributes": True}

    id: uuid.UUID
    connector_id: uuid.UUID
    trigger: str
    status: SyncStatus
    added: int
    changed: int
    removed: int
    unchanged: int
    failed: int
    job_id: uuid.UUID | None
    details: dict
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    duration_s: float | None = None


class ConnectorOut(BaseModel):
    model_config = {"from_attributes": True}

    id: uuid.UUID
    collection_id: uuid.UUID
    name: str
    kind: str
    config: dict
    interval_s: int | None
    enabled: bool
    next_sync_at: datetime | None
    last_sync_at: datetime | None
    state: dict
    created_at: datetime
    last_sync: SyncOut | None = None


def _sync_out(sync: ConnectorSync) -> SyncOut:
    out = SyncOut.model_validate(sync)
    if sync.started_at and sync.finished_at:
        out.duration_s = round((sync.finished_at - sync.started_at).total_seconds(), 3)
    return out


def _out(session: Session, connector: Connector) -> ConnectorOut:
    last = session.execute(
        select(ConnectorSync)
        .where(ConnectorSync.connector_id == connector.id)
        .order_by(ConnectorSync.created_at.desc())
        .limit(1)
    ).scalar_one_or_none()
    return ConnectorOut.model_validate(connector).model_copy(update={"last_sync": last and _sync_out(last)})


def _checked_config(kind: str, config: dict, settings: Settings) -> dict:
    try:
        stored = validate_config(kind, config)
    except ValidationError as exc:
        raise ClientError(
            422, "invalid_config", f"invalid {kind} connector config: {exc.errors()[0]['msg']}"
        ) from None
    try:
        check_allowed(kind, stored, settings)
    except SourceError as exc:
        raise ClientError(422, "source_not_allowed", str(exc)) from None
    return stored


def _interval(value: int | None, settings: Settings) -> int | None:
    if value and value < settings.connectors.min_interval_s:
        raise ClientError(
            422, "interval_too_short", f"interval_s must be at least {settings.connectors.min_interval_s}"
        )
    return value or None


def get_connector(session: Session, tenant: uuid.UUID, connector_id: uuid.UUID) -> Connector:
    row = session.execute(
        select(Connector)
        .join(Collection, Collection.id == Connector.collection_id)
        .where(Connector.id == connector_id, Collection.tenant_id == tenant)
    ).scalar_one_or_none()
    if row is None:
        raise ClientError(404, "connector_not_found", f"no connector {connector_id}")
    return row


@router.post("/collections/{collection}/connectors", status_code=201, response_model=ConnectorOut)
def create_connector(
    collection: str, body: ConnectorCreate, session: SessionDep, state: StateDep, tenant: CurrentTenant
):
    """A scheduled connector syncs at the scheduler's next tick, then every `interval_s`."""
    settings = state.settings
    row = get_collection(session, tenant, collection)
    connector = Connector(
        collection_id=row.id,
        name=body.name,
        kind=body.kind,
        config=_checked_config(body.kind, body.config, settings),
        interval_s=_interval(body.interval_s, settings),
        enabled=body.enabled,
        state={},
    )
    connector.next_sync_at = func.now() if connector.interval_s else None
    session.add(connector)
    try:
        session.flush()
    except IntegrityError:
        raise ClientError(
            409, "connector_exists", f"the collection already has a connector {body.name!r}"
        ) from None
    session.refresh(connector)
    out = _out(session, connector)
    session.commit()
    return out


@router.get("/collections/{collection}/connectors", response_model=list[ConnectorOut])
def list_connectors(collection: str, session: SessionDep, tenant: CurrentTenant):
    row = get_collection(session, tenant, collection)
    rows = session.execute(
        select(Connector).where(Connector.collection_id == row.id).order_by(Connector.created_at)
    ).scalars()
    return [_out(session, c) for c in rows]


@router.get("/connectors/{connector_id}", response_model=ConnectorOut)
def read_connector(connector_id: uuid.UUID, session: SessionDep, tenant: CurrentTenant):
    return _out(session, get_connector(session, tenant, connector_id))


@router.patch("/connectors/{connector_id}", response_model=ConnectorOut)
def update_connector(
    connector_id: uuid.UUID,
    body: ConnectorUpdate,
    session: SessionDep,
    state: StateDep,
    tenant: CurrentTenant,
):
    connector = get_connector(session, tenant, connector_id)
    if body.config is not None:
        connector.config = _checked_config(connector.kind, body.config, state.settings)
    if "interval_s" in body.model_fields_set:
        connector.interval_s = _interval(body.interval_s, state.settings)
        connector.next_sync_at = func.now() if connector.interval_s else None
    if body.enabled is not None:
        connector.enabled = body.enabled
    session.flush()
    session.refresh(connector)
    out = _out(session, connector)
    session.commit()
    return out


@router.delete("/connectors/{connector_id}", status_code=204)
def delete_connector(connector_id: uuid.UUID, session: SessionDep, tenant: CurrentTenant):
    """The connector and its history go; the documents it brought in stay (delete them as documents)."""
    session.delete(get_connector(session, tenant, connector_id))
    session.commit()
    return Response(status_code=204)


@router.post("/connectors/{connector_id}/sync", status_code=202, response_model=SyncOut)
def sync_now(connector_id: uuid.UUID, session: SessionDep, state: StateDep, tenant: CurrentTenant):
    """Queue a sync now ("sync now"); 409 while one is queued or running."""
    connector = get_connector(session, tenant, connector_id)
    sync = open_sync(session, connector, "manual", state.settings.connectors.sync_time_limit_s)
    if sync is None:
        raise ClientError(409, "sync_in_progress", "a sync of this connector is already queued or running")
    session.flush()
    session.refresh(sync)
    out = _sync_out(sync)
    session.commit()
    send_sync(state.celery, state.settings, sync.id)
    return out


@router.get("/connectors/{connector_id}/syncs", response_model=list[SyncOut])
def list_syncs(
    connector_id: uuid.UUID,
    session: SessionDep,
    tenant: CurrentTenant,
    limit: int = Query(default=20, ge=1, le=200),
):
    connector = get_connector(session, tenant, connector_id)
    rows = session.execute(
        select(ConnectorSync)
        .where(ConnectorSync.connector_id == connector.id)
        .order_by(ConnectorSync.created_at.desc())
        .limit(limit)
    ).scalars()
    return [_sync_out(s) for s in rows]
