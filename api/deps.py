"""FastAPI dependencies as Annotated aliases."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from api.errors import ApiError
from api.state import AppState
from core.database import session_scope
from core.settings import Settings
from core.tenancy import authenticate

DEFAULT_TENANT_ID = uuid.UUID("00000000-0000-0000-0000-000000000001")


def get_state(request: Request) -> AppState:
    return request.app.state.groundwork


StateDep = Annotated[AppState, Depends(get_state)]


def get_settings_dep(state: StateDep) -> Settings:
    return state.settings


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]


def get_session(state: StateDep) -> Iterator[Session]:
    with session_scope(state.sessions) as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]


def get_current_tenant(request: Request, session: SessionDep, settings: SettingsDep) -> uuid.UUID:
    header = request.headers.get("authorization", "")
    if not header:
        if settings.auth_required:
            raise ApiError(401, "unauthorized", "an API key is required: Authorization: Bearer <key>")
        return DEFAULT_TENANT_ID
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key:
        raise ApiError(401, "unauthorized", "malformed Authorization header; expected 'Bearer <key>'")
    tenant_id = authenticate(session, key.strip())
    session.commit()  # records the key's use and frees the connection for the rest of the request
    if tenant_id is not None:
        return tenant_id
    if settings.auth_required:
        raise ApiError(401, "unauthorized", "unknown or revoked API key")
    # Auth off: clients that always send some key (the OpenAI SDK does) act as the default tenant.
    return DEFAULT_TENANT_ID


CurrentTenant = Annotated[uuid.UUID, Depends(get_current_tenant)]
