"""Admission's 503 for a tenant at its share of answers, before the request costs anything more.

A tenant flooding `/v1/ask` past its share gets 503 + Retry-After on each retry. Answered by the
route, every refusal first went through authentication (a key lookup) and the rate limiter (about
twenty round trips to its counters' storage), all on the database and the interpreter the other
tenants' answers need: under such a flood another tenant's asks took 4-5x their unloaded time
(`python -m benchmarks.fairness`). This ASGI middleware answers from the headers instead: the key's
tenant comes from `KnownKeys`, which authentication fills.

NOTE: the cache only ever refuses, never admits, so it cannot let a revoked key in: such a key,
while its tenant holds its share, gets this 503 instead of its 401, and nothing else. A key not yet
seen by this process goes the usual way.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Receive, Scope, Send

from api.deps import DEFAULT_TENANT_ID
from api.errors import error_response
from api.metrics import admit_early
from core.errors import ClientError
from core.tenancy import hash_api_key

if TYPE_CHECKING:
    from api.state import AppState

# The answer routes whose admission needs nothing from the body (chat's depends on its model).
_ROUTES = {"/v1/ask": "ask"}


class KnownKeys:
    """Tenants of the API keys this process authenticated, by key hash (the most recent `size`)."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._tenants: OrderedDict[str, uuid.UUID] = OrderedDict()

    def learn(self, digest: str, tenant: uuid.UUID) -> None:
        """Remember an authenticated key by its stored hash (`ApiKey.key_hash`: not hashed again)."""
        self._tenants[digest] = tenant
        self._tenants.move_to_end(digest)
        if len(self._tenants) > self.size:
            self._tenants.popitem(last=False)

    def tenant(self, plain: str) -> uuid.UUID | None:
        return self._tenants.get(hash_api_key(plain))


def bearer(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The bearer key of raw ASGI headers, if any."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, plain = value.decode("latin-1").partition(" ")
            if scheme.lower() != "bearer":
                return None
            return plain.strip() or None
    return None


def header_tenant(state: AppState, scope: Scope) -> uuid.UUID | None:
    """The request's tenant as far as the headers tell without a lookup: a key this process
    authenticated, or the default tenant where auth is off and no key is sent; else None."""
    plain = bearer(scope["headers"])
    if plain is not None:
        return state.known_keys.tenant(plain)
    # auth off and no key: the default tenant (the route answers 401 where auth is on)
    return None if state.settings.auth_required else DEFAULT_TENANT_ID


class EarlyRefusal:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        name = _ROUTES.get(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        state = getattr(scope["app"].state, "groundwork", None) if name else None
        if state is not None and state.answer_slots is not None:
            tenant = header_tenant(state, scope)
            if tenant is not None:
                try:
                    admit_early(state, state.answer_slots, name, tenant)
                except ClientError as refusal:
                    # NOTE: the route the refusal stands for, so that it is counted under it
                    # (groundwork:http_responses_total, the 503 alert) and not as unmatched.
                    scope["route"] = _Refused(scope["path"])
                    response = error_response(
                        refusal.status, refusal.code, refusal.message, headers=refusal.headers
                    )
                    return await response(scope, receive, send)
        await self.app(scope, receive, send)


@dataclass(frozen=True)
class _Refused:
    """Stands for the route in `scope["route"]`, which only its `path` is read from (observability)."""

    path: str
