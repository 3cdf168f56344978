"""The caller's tenant (the default tenant when auth is off); the UI names it on its keys page."""

from __future__ import annotations

import uuid

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict

from api.deps import CurrentTenant, SessionDep, SettingsDep
from core.models import Tenant

router = APIRouter(prefix="/v1", tags=["tenant"])


class TenantOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    # Whether requests need a key: off, every caller acts as the default tenant (the UI says so).
    auth_required: bool = True


@router.get("/tenant", response_model=TenantOut)
def read_tenant(session: SessionDep, settings: SettingsDep, tenant: CurrentTenant):
    """The tenant the caller's key belongs to, and whether the platform requires keys."""
    row = session.get(Tenant, tenant)
    return TenantOut(id=row.id, name=row.name, auth_required=settings.auth_required)
