"""FastAPI dependencies as Annotated aliases."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from api.state import AppState
from core.database import session_scope
from core.errors import ClientError
from core.settings import Settings
from core.tenancy import SCOPES, authenticate, scope_to_tenant
from core.tracing import traced

DEFAULT_TENANT_ID = uuid.UUID("00000000-0000-0000-0000-000000000001")


def unauthorized(message: str) -> ClientError:
    """401 with the challenge RFC 6750 asks for."""
    return ClientError(
        401, "unauthorized", message, headers={"WWW-Authenticate": 'Bearer realm="groundwork"'}
    )


# NOTE: dependencies that do no I/O are `async def`: FastAPI runs a plain `def` one in its threadpool,
# a hop to a worker thread and back to the event loop on every request, each a wait behind whatever
# the loop and the interpreter are busy with (under another tenant's flood, its requests).


async def get_state(request: Request) -> AppState:
    return request.app.state.groundwork


StateDep = Annotated[AppState, Depends(get_state)]


async def get_settings_dep(state: StateDep) -> Settings:
    return state.settings


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]


def get_session(state: StateDep) -> Iterator[Session]:
    with session_scope(state.sessions) as session:
        yield session


# NOTE: scope="function" commits when the route returns, before the response is sent. FastAPI >= 0.118
# otherwise runs the exit after sending: a client could see 201 for a row that is not committed yet
# (or never is, if the commit then fails).
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


@dataclass(frozen=True)
class Principal:
    """Who is calling: the tenant, the API key (None without one, auth off) and what it may do."""

    tenant_id: uuid.UUID
    key_id: uuid.UUID | None
    scopes: frozenset[str]


# Declares the bearer scheme in the OpenAPI document; the header is parsed below.
_bearer = HTTPBearer(auto_error=False, description="An API key: `groundwork keys create <name>`.")


@traced("auth")
def get_principal(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    state: StateDep,
    _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    header = request.headers.get("authorization", "")
    principal = Principal(DEFAULT_TENANT_ID, None, frozenset(SCOPES))
    if not header:
        if settings.auth_required:
            raise unauthorized("an API key is required: Authorization: Bearer <key>")
    else:
        scheme, _, plain = header.partition(" ")
        if scheme.lower() != "bearer" or not plain:
            raise unauthorized("malformed Authorization header; expected 'Bearer <key>'")
        key = authenticate(session, plain.strip())
        session.commit()  # records the key's use and frees the connection for the rest of the request
        if key is not None:
            principal = Principal(key.tenant_id, key.id, frozenset(key.scopes))
            state.known_keys.learn(key.key_hash, key.tenant_id)
        elif settings.auth_required:
            raise unauthorized("unknown, revoked or expired API key")
        # Auth off: clients that always send some key (the OpenAI SDK does) act as the default tenant.
    scope_to_tenant(session, principal.tenant_id)
    return principal


CurrentPrincipal = Annotated[Principal, Depends(get_principal)]


def require_scope(principal: Principal, scope: str) -> None:
    """403 unless the key has `scope` (read, write, admin)."""
    if scope not in principal.scopes:
        raise ClientError(403, "insufficient_scope", f"this API key lacks the {scope!r} scope")


async def get_current_tenant(request: Request, principal: CurrentPrincipal) -> uuid.UUID:
    """The caller's tenant; reading needs the `read` scope, any other method `write`."""
    require_scope(principal, "read" if request.method in ("GET", "HEAD", "OPTIONS") else "write")
    return principal.tenant_id


async def get_reading_tenant(principal: CurrentPrincipal) -> uuid.UUID:
    """For POST routes that only read (search, ask, chat): the `read` scope is enough."""
    require_scope(principal, "read")
    return principal.tenant_id


def get_admin(principal: CurrentPrincipal) -> Principal:
    require_scope(principal, "admin")
    return principal


CurrentTenant = Annotated[uuid.UUID, Depends(get_current_tenant)]
ReadingTenant = Annotated[uuid.UUID, Depends(get_reading_tenant)]
AdminPrincipal = Annotated[Principal, Depends(get_admin)]
