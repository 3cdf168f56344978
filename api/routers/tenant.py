"""The caller's tenant (the default tenant when auth is off); the UI names it on its keys page."""

from __future__ import annotations

import uuid

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict

from api.deps import CurrentTenant, SessionDep
from core.models import Tenant

router = APIRouter(prefix="/v1", tags=["tenant"])


class TenantOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str


@router.get("/tenant", response_model=TenantOut)
def read_tenant(session: SessionDep, tenant: CurrentTenant):
    """The tenant the caller's key belongs to."""
    return session.get(Tenant, tenant)
