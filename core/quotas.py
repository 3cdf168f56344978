"""Storage quotas per tenant: documents and stored bytes (settings.limits), for every path that adds
documents or dataset files (uploads, eval ingest, eval dataset uploads).

A tenant's usage is its documents that are not `failed` (a rejected or failed file holds nothing)
plus the bytes of its uploaded evaluation datasets. A check runs inside the transaction that adds
the rows, after `lock_usage`: a transaction-level advisory lock per tenant, so that concurrent
additions of one tenant are checked one after the other and never pass a quota together (check
then insert in each transaction, serialised until its commit). Other tenants are not blocked.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from core.models import Document, DocumentStatus
from core.settings.limits import LimitSettings

# Separates this lock's keys from other advisory locks of the database.
_LOCK_SPACE = 0x5155_4F54  # "QUOT"


class QuotaExceeded(Exception):
    """The addition would take the tenant over a quota (the API answers 413 quota_exceeded)."""


def tenant_datasets_dir(data_dir: Path, tenant: uuid.UUID) -> Path:
    """Where the tenant's uploaded evaluation datasets live (counted in its storage)."""
    return (data_dir / "evals" / "uploads" / str(tenant)).resolve()


def lock_usage(session: Session, tenant: uuid.UUID) -> None:
    """Serialise the tenant's quota checks until this transaction ends."""
    key = (_LOCK_SPACE << 32) ^ (tenant.int & 0xFFFF_FFFF_FFFF)
    session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key - (1 << 63)})


def _dataset_bytes(folder: Path) -> int:
    if not folder.is_dir():
        return 0
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def usage(session: Session, tenant: uuid.UUID, data_dir: Path) -> tuple[int, int]:
    """(documents, stored bytes) the tenant holds now, as this transaction sees them."""
    count, stored = session.execute(
        select(func.count(), func.coalesce(func.sum(Document.size_bytes), 0)).where(
            Document.tenant_id == tenant, Document.status != DocumentStatus.failed
        )
    ).one()
    return int(count), int(stored) + _dataset_bytes(tenant_datasets_dir(data_dir, tenant))


def check_quota(
    session: Session,
    tenant: uuid.UUID,
    knobs: LimitSettings,
    data_dir: Path,
    add_documents: int = 0,
    add_bytes: int = 0,
) -> None:
    """QuotaExceeded if the tenant's usage plus the addition is over a quota. Call `lock_usage` first
    in the same transaction. Rows this transaction already inserted count in the usage: a caller
    that flushed its documents checks with nothing more to add (and only when it added some)."""
    count, stored = usage(session, tenant, data_dir)
    if count + add_documents > knobs.max_documents_per_tenant:
        raise QuotaExceeded(
            f"document quota: {count + add_documents} documents would be over "
            f"{knobs.max_documents_per_tenant}"
        )
    limit = int(knobs.max_stored_mb_per_tenant * 1_000_000)
    if stored + add_bytes > limit:
        raise QuotaExceeded(
            f"storage quota: {(stored + add_bytes) / 1e6:.1f} MB would be over "
            f"{knobs.max_stored_mb_per_tenant:g} MB"
        )
