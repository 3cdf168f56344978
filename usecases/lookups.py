"""Lookups that several use cases (and the routers) share."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from core.errors import ClientError
from core.models import Collection


def get_collection(session: Session, tenant: uuid.UUID, ref: str) -> Collection:
    """By id or by name, within the tenant; 404 otherwise."""
    query = select(Collection).where(Collection.tenant_id == tenant)
    try:
        query = query.where(Collection.id == uuid.UUID(ref))
    except ValueError:
        query = query.where(Collection.name == ref)
    collection = session.execute(query).scalar_one_or_none()
    if collection is None:
        raise ClientError(404, "collection_not_found", f"no collection {ref!r}")
    return collection
