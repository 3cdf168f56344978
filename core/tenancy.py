"""Tenants and API keys. A key is shown once at creation; only its sha256 is stored."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from core.models import ApiKey, Tenant

KEY_PREFIX = "gw_"


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def get_or_create_tenant(session: Session, name: str) -> Tenant:
    tenant = session.scalar(select(Tenant).where(Tenant.name == name))
    if tenant is None:
        tenant = Tenant(name=name)
        session.add(tenant)
        session.flush()
    return tenant


def create_api_key(session: Session, tenant: Tenant, name: str) -> tuple[ApiKey, str]:
    """A new key for `tenant`; returns the row and the plain key (not retrievable later)."""
    plain = KEY_PREFIX + secrets.token_urlsafe(32)
    row = ApiKey(tenant_id=tenant.id, name=name, key_hash=hash_api_key(plain), prefix=plain[:10])
    session.add(row)
    session.flush()
    return row, plain


def authenticate(session: Session, plain: str) -> uuid.UUID | None:
    """The tenant of a live key, or None; records the key's last use."""
    row = session.scalar(select(ApiKey).where(ApiKey.key_hash == hash_api_key(plain)))
    if row is None or row.revoked_at is not None:
        return None
    row.last_used_at = datetime.now(UTC)
    return row.tenant_id


def revoke_api_key(session: Session, prefix: str) -> int:
    rows = session.scalars(select(ApiKey).where(ApiKey.prefix == prefix, ApiKey.revoked_at.is_(None))).all()
    for row in rows:
        row.revoked_at = datetime.now(UTC)
    return len(rows)
