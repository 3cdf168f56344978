"""Rows reached through their collection: found only within the caller's tenant."""

from __future__ import annotations

import uuid
from typing import TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session

from core.errors import ClientError
from core.models import Collection, Document, IngestionJob

Row = TypeVar("Row", Document, IngestionJob)


def get_in_tenant(
    session: Session, tenant: uuid.UUID, model: type[Row], row_id: uuid.UUID, what: str, code: str
) -> Row:
    """The row if its collection belongs to `tenant`; another tenant's row is a 404 like a missing one."""
    row = session.execute(
        select(model)
        .join(Collection, Collection.id == model.collection_id)
        .where(model.id == row_id, Collection.tenant_id == tenant)
    ).scalar_one_or_none()
    if row is None:
        raise ClientError(404, code, f"no {what} {row_id}")
    return row
