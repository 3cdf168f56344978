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


def unauthorized(message: str) -> ApiError:
    """401 with the challenge RFC 6750 asks for."""
    return ApiError(401, "unauthorized", message, headers={"WWW-Authenticate": 'Bearer realm="groundwork"'})


def get_state(request: Request) -> AppState:
    return request.app.state.groundwork


StateDep = Annotated[AppState, Depends(get_state)]


def get_settings_dep(state: StateDep) -> Settings:
    return state.settings


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]


def get_session(state: StateDep) -> Iterator[Session]:
    with session_scope(state.sessions) as session:
        yield session


# NOTE: scope="function" commits when the route returns, before the response is sent. FastAPI >= 0.118
# otherwise runs the exit after sending: a client could see 201 for a row that is not committed yet
# (or never is, if the commit then fails).
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


def get_current_tenant(request: Request, session: SessionDep, settings: SettingsDep) -> uuid.UUID:
    header = request.headers.get("authorization", "")
    if not header:
        if settings.auth_required:
            raise unauthorized("an API key is required: Authorization: Bearer <key>")
        return DEFAULT_TENANT_ID
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key:
        raise unauthorized("malformed Authorization header; expected 'Bearer <key>'")
    tenant_id = authenticate(session, key.strip())
    session.commit()  # records the key's use and frees the connection for the rest of the request
    if tenant_id is not None:
        return tenant_id
    if settings.auth_required:
        raise unauthorized("unknown or revoked API key")
    # Auth off: clients that always send some key (the OpenAI SDK does) act as the default tenant.
    return DEFAULT_TENANT_ID


CurrentTenant = Annotated[uuid.UUID, Depends(get_current_tenant)]
