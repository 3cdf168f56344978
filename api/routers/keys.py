"""API keys of the caller's tenant, managed with an `admin` key (the CLI: `groundwork keys`)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field
from sqlalchemy import select

from api.deps import AdminPrincipal, SessionDep
from core.errors import ClientError
from core.models import ApiKey, Tenant
from core.tenancy import SCOPES, create_api_key, revoke_api_key

router = APIRouter(prefix="/v1/admin/keys", tags=["admin"])


class KeyCreate(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    scopes: list[str] = Field(default_factory=lambda: ["read"], description=f"Of {', '.join(SCOPES)}.")
    expires_in_days: float | None = Field(default=None, gt=0, le=3650, description="Unset: never expires.")


class KeyOut(BaseModel):
    id: uuid.UUID
    name: str
    prefix: str
    scopes: list[str]
    created_at: datetime | None
    expires_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None


class KeyCreated(KeyOut):
    key: str = Field(description="The key itself; shown once, not retrievable later.")


def _out(row: ApiKey) -> dict:
    return {name: getattr(row, name) for name in KeyOut.model_fields}


@router.post("", status_code=201, response_model=KeyCreated)
def create_key(body: KeyCreate, session: SessionDep, admin: AdminPrincipal):
    """Create a key for the caller's tenant."""
    expires = datetime.now(UTC) + timedelta(days=body.expires_in_days) if body.expires_in_days else None
    tenant = session.get(Tenant, admin.tenant_id)
    try:
        row, plain = create_api_key(session, tenant, body.name, body.scopes, expires)
    except ValueError as exc:
        raise ClientError(422, "invalid_scopes", str(exc)) from None
    session.commit()  # before the response: a list read right after (the tenants' live keys) sees it
    return KeyCreated(**_out(row), key=plain)


@router.get("", response_model=list[KeyOut])
def list_keys(session: SessionDep, admin: AdminPrincipal):
    rows = session.scalars(
        select(ApiKey).where(ApiKey.tenant_id == admin.tenant_id).order_by(ApiKey.created_at)
    )
    return [KeyOut(**_out(r)) for r in rows]


@router.delete("/{prefix}", status_code=204)
def revoke_key(prefix: str, session: SessionDep, admin: AdminPrincipal):
    """Revoke the tenant's live keys with this prefix."""
    if not revoke_api_key(session, prefix, admin.tenant_id):
        raise ClientError(404, "key_not_found", f"no live key with prefix {prefix!r}")
    return Response(status_code=204)
