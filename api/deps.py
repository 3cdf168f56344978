"""FastAPI dependencies as Annotated aliases."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from api.errors import ApiError
from api.state import AppState
from core.models import ApiKey
from core.settings import Settings

DEFAULT_TENANT_ID = uuid.UUID("00000000-0000-0000-0000-000000000001")


def get_state(request: Request) -> AppState:
    return request.app.state.groundwork


StateDep = Annotated[AppState, Depends(get_state)]


def get_settings_dep(state: StateDep) -> Settings:
    return state.settings


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]


def get_session(state: StateDep) -> Iterator[Session]:
    session = state.sessions()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


SessionDep = Annotated[Session, Depends(get_session)]


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def get_current_tenant(request: Request, session: SessionDep, settings: SettingsDep) -> uuid.UUID:
    header = request.headers.get("authorization", "")
    if not header:
        if settings.auth_required:
            raise ApiError(401, "unauthorized", "an API key is required: Authorization: Bearer <key>")
        return DEFAULT_TENANT_ID
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key:
        raise ApiError(401, "unauthorized", "malformed Authorization header; expected 'Bearer <key>'")
    api_key = session.scalar(select(ApiKey).where(ApiKey.key_hash == hash_api_key(key.strip())))
    if api_key is None or api_key.revoked_at is not None:
        raise ApiError(401, "unauthorized", "unknown or revoked API key")
    api_key.last_used_at = datetime.now(UTC)
    return api_key.tenant_id


CurrentTenant = Annotated[uuid.UUID, Depends(get_current_tenant)]
