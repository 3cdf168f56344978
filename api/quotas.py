"""Storage quotas per tenant: documents and uploaded bytes (settings.limits)."""

from __future__ import annotations

import uuid

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from api.errors import ApiError
from core.models import Document
from core.settings.limits import LimitSettings


def check_upload_quota(
    session: Session, tenant: uuid.UUID, knobs: LimitSettings, files: int, size: int
) -> None:
    """Refuse (413 quota_exceeded) an upload that would take the tenant over a quota.

    NOTE: new versions of stored documents count in full here, so a tenant at its quota frees room
    (deletes) before replacing documents.
    """
    count, stored = session.execute(
        select(func.count(), func.coalesce(func.sum(Document.size_bytes), 0)).where(
            Document.tenant_id == tenant
        )
    ).one()
    if count + files > knobs.max_documents_per_tenant:
        raise ApiError(
            413,
            "quota_exceeded",
            f"document quota: {count} stored + {files} uploaded is over {knobs.max_documents_per_tenant}",
        )
    limit = knobs.max_stored_mb_per_tenant * 1e6
    if stored + size > limit:
        raise ApiError(
            413,
            "quota_exceeded",
            f"storage quota: {(stored + size) / 1e6:.1f} MB would be over "
            f"{knobs.max_stored_mb_per_tenant:g} MB",
        )
