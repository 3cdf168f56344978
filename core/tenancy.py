"""Tenants and API keys. A key is shown once at creation; only its sha256 is stored."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import event, select, text
from sqlalchemy.orm import Session, sessionmaker

from core.models import ApiKey, Tenant

KEY_PREFIX = "gw_"
# The non-owner role API transactions run as; row-level security applies to it (migration 0005).
APP_ROLE = "groundwork_app"
SCOPES = ("read", "write", "admin")
# `last_used_at` is kept to this precision: writing it on every request made each one a write
# transaction (a flood of refused requests then loaded the database other tenants wait on).
LAST_USED_PRECISION = timedelta(minutes=1)


def scope_to_tenant(session: Session, tenant_id: uuid.UUID) -> None:
    """Run this session's transactions, from now on, as the app role with `app.tenant_id` set, so
    that row-level security hides every other tenant's rows even from a query without a filter."""
    session.info["tenant_id"] = tenant_id
    if session.in_transaction():
        _apply_tenant(session.connection(), tenant_id)


def _apply_tenant(connection, tenant_id: uuid.UUID) -> None:
    # NOTE: both are transaction-local (set_config(..., true), `role` being what SET LOCAL ROLE
    # sets): a pooled connection never carries one request's tenant into the next. One statement:
    # this runs at the start of every tenant transaction, and each round trip counts.
    connection.execute(
        text("SELECT set_config('role', :role, true), set_config('app.tenant_id', :t, true)"),
        {"role": APP_ROLE, "t": str(tenant_id)},
    )


def install_tenant_scoping(factory: sessionmaker[Session]) -> None:
    """Make sessions of `factory` apply their tenant (see scope_to_tenant) at each transaction start."""

    @event.listens_for(factory, "after_begin")
    def _after_begin(session: Session, transaction, connection) -> None:
        tenant_id = session.info.get("tenant_id")
        if tenant_id is not None:
            _apply_tenant(connection, tenant_id)


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def get_or_create_tenant(session: Session, name: str) -> Tenant:
    tenant = session.scalar(select(Tenant).where(Tenant.name == name))
    if tenant is None:
        tenant = Tenant(name=name)
        session.add(tenant)
        session.flush()
    return tenant


def create_api_key(
    session: Session,
    tenant: Tenant,
    name: str,
    scopes: list[str] | None = None,
    expires_at: datetime | None = None,
) -> tuple[ApiKey, str]:
    """A new key for `tenant` (all scopes unless given); returns the row and the plain key (shown
    once, not retrievable later)."""
    scopes = list(SCOPES) if scopes is None else scopes
    unknown = set(scopes) - set(SCOPES)
    if unknown or not scopes:
        raise ValueError(f"scopes must be a non-empty subset of {', '.join(SCOPES)}")
    plain = KEY_PREFIX + secrets.token_urlsafe(32)
    row = ApiKey(
        tenant_id=tenant.id,
        name=name,
        key_hash=hash_api_key(plain),
        prefix=plain[:10],
        scopes=sorted(set(scopes)),
        expires_at=expires_at,
    )
    session.add(row)
    session.flush()
    return row, plain


def authenticate(session: Session, plain: str) -> ApiKey | None:
    """The live (not revoked, not expired) key, or None; records its last use (to the minute)."""
    row = session.scalar(select(ApiKey).where(ApiKey.key_hash == hash_api_key(plain)))
    now = datetime.now(UTC)
    if row is None or row.revoked_at is not None or (row.expires_at is not None and row.expires_at <= now):
        return None
    if row.last_used_at is None or now - row.last_used_at >= LAST_USED_PRECISION:
        row.last_used_at = now
    return row


def revoke_api_key(session: Session, prefix: str, tenant_id: uuid.UUID | None = None) -> int:
    """Revoke the live keys with `prefix` (of one tenant only, if given); returns how many."""
    query = select(ApiKey).where(ApiKey.prefix == prefix, ApiKey.revoked_at.is_(None))
    if tenant_id is not None:
        query = query.where(ApiKey.tenant_id == tenant_id)
    rows = session.scalars(query).all()
    for row in rows:
        row.revoked_at = datetime.now(UTC)
    return len(rows)
