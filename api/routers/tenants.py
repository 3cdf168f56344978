"""Tenants, managed by the operator: admin keys of the default tenant (the operator's; also every
caller when auth is off) list tenants and create them, each with a first admin key shown once. A
tenant's own admins manage only their keys (api/routers/keys.py)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field
from sqlalchemy import func, select

from api.deps import DEFAULT_TENANT_ID, AdminPrincipal, Principal, SessionDep
from core.errors import ClientError
from core.models import ApiKey, Tenant
from core.tenancy import create_api_key

router = APIRouter(prefix="/v1/admin/tenants", tags=["admin"])


def get_operator(admin: AdminPrincipal) -> Principal:
    if admin.tenant_id != DEFAULT_TENANT_ID:
        raise ClientError(
            403, "not_operator", "only admin keys of the default (operator) tenant manage tenants"
        )
    return admin


Operator = Annotated[Principal, Depends(get_operator)]


class TenantCreate(BaseModel):
    name: str = Field(min_length=1, max_length=200, pattern=r"^[\w][\w .@-]*$")


class TenantOut(BaseModel):
    id: uuid.UUID
    name: str
    created_at: datetime | None
    live_keys: int


class TenantCreated(TenantOut):
    key: str = Field(description="The new tenant's first admin key; shown once, not retrievable later.")


@router.get("", response_model=list[TenantOut])
def list_tenants(session: SessionDep, _: Operator):
    live = (ApiKey.revoked_at.is_(None)) & ((ApiKey.expires_at.is_(None)) | (ApiKey.expires_at > func.now()))
    counts = dict(
        session.execute(select(ApiKey.tenant_id, func.count()).where(live).group_by(ApiKey.tenant_id)).all()
    )
    rows = session.scalars(select(Tenant).order_by(Tenant.created_at))
    return [
        TenantOut(id=t.id, name=t.name, created_at=t.created_at, live_keys=counts.get(t.id, 0)) for t in rows
    ]


@router.post("", status_code=201, response_model=TenantCreated)
def create_tenant(body: TenantCreate, session: SessionDep, _: Operator):
    """A new tenant and its first admin key (with it, the tenant's admins create their other keys)."""
    if session.scalar(select(Tenant.id).where(Tenant.name == body.name)) is not None:
        raise ClientError(409, "tenant_exists", f"a tenant named {body.name!r} exists")
    tenant = Tenant(name=body.name)
    session.add(tenant)
    session.flush()
    _, plain = create_api_key(session, tenant, "admin")
    session.commit()  # before the response: the key is usable as soon as it is shown
    return TenantCreated(id=tenant.id, name=tenant.name, created_at=tenant.created_at, live_keys=1, key=plain)
