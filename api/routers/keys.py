"""API keys of the caller's tenant: create (the key is returned once), list, revoke."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select

from api.deps import CurrentTenant, SessionDep
from api.errors import ApiError
from core.models import ApiKey, Tenant
from core.tenancy import create_api_key

router = APIRouter(prefix="/v1", tags=["keys"])


class TenantOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str


class KeyCreate(BaseModel):
    name: str = Field(min_length=1, max_length=200, description="What the key is for.")


class KeyOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class KeyCreated(KeyOut):
    key: str = Field(description="The key itself; it is shown only in this response.")


@router.get("/tenant", response_model=TenantOut)
def read_tenant(session: SessionDep, tenant: CurrentTenant):
    """The tenant the caller's key belongs to (the default tenant when auth is off)."""
    return session.get(Tenant, tenant)


@router.get("/keys", response_model=list[KeyOut])
def list_keys(session: SessionDep, tenant: CurrentTenant):
    """The tenant's keys, newest first; revoked ones stay listed with their revocation time."""
    rows = session.scalars(
        select(ApiKey).where(ApiKey.tenant_id == tenant).order_by(ApiKey.created_at.desc())
    )
    return [KeyOut.model_validate(r) for r in rows]


@router.post("/keys", status_code=201, response_model=KeyCreated)
def create_key(body: KeyCreate, session: SessionDep, tenant: CurrentTenant):
    """A new key for the caller's tenant."""
    row, plain = create_api_key(session, session.get(Tenant, tenant), body.name)
    session.commit()
    return KeyCreated(**KeyOut.model_validate(row).model_dump(), key=plain)


@router.post("/keys/{key_id}/revoke", response_model=KeyOut)
def revoke_key(key_id: uuid.UUID, session: SessionDep, tenant: CurrentTenant):
    """Revoke one of the tenant's keys; requests with it are refused from now on."""
    row = session.scalar(select(ApiKey).where(ApiKey.id == key_id, ApiKey.tenant_id == tenant))
    if row is None:
        raise ApiError(404, "key_not_found", f"no API key {key_id}")
    if row.revoked_at is None:
        row.revoked_at = datetime.now(UTC)
        session.commit()
    return KeyOut.model_validate(row)
