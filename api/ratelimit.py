"""Rate limits per API key and per tenant, requests and tokens per minute, with the `limits` library.

Requests are counted on admission (moving window: exact). Tokens are known only when an answer is
done, so admission refuses while a window has no tokens left, and the answer's prompt + completion
tokens are charged at the end (sliding-window counters: a token is one count, not one entry).
Refusals are 429 with `Retry-After`; every limited response carries OpenAI's `x-ratelimit-*`
headers for the tightest of its limits.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request
from limits import RateLimitItemPerMinute
from limits.storage import Storage, storage_from_string
from limits.strategies import MovingWindowRateLimiter, SlidingWindowCounterRateLimiter
from sqlalchemy import Engine

from api.deps import CurrentPrincipal, Principal, StateDep
from api.errors import ApiError
from api.limit_storage import PostgresStorage
from core.settings import Settings
from core.tracing import traced

_build_lock = threading.Lock()


@dataclass
class _Scope:
    kind: str  # key | tenant
    ident: str
    requests: RateLimitItemPerMinute
    tokens: RateLimitItemPerMinute


@dataclass
class Meter:
    """What a limited request holds: its headers, and `charge` for the tokens it used."""

    limiter: RateLimiter | None
    scopes: list[_Scope]
    headers: dict[str, str] = field(default_factory=dict)

    def charge(self, usage: dict) -> None:
        tokens = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
        if self.limiter is not None and tokens > 0:
            self.limiter.charge(self.scopes, tokens)


def limit_storage(settings: Settings, engine: Engine) -> Storage:
    """The counters' storage: `limits.storage_url`, else the broker when it is Redis, else the
    platform's database (shared by every API process, unlike in-process memory)."""
    url = settings.limits.storage_url
    if url is None and (settings.broker_url or "").startswith(("redis://", "rediss://")):
        url = settings.broker_url
    if url is None:
        return PostgresStorage(engine)
    options = {"key_prefix": settings.limits.key_prefix} if url.startswith("redis") else {}
    return storage_from_string(url, **options)


class RateLimiter:
    def __init__(self, settings: Settings, storage: Storage) -> None:
        knobs = settings.limits
        self.requests = MovingWindowRateLimiter(storage)
        self.tokens = SlidingWindowCounterRateLimiter(storage)
        self.knobs = knobs

    def scopes(self, principal: Principal) -> list[_Scope]:
        k = self.knobs
        scopes = [
            _Scope(
                "tenant",
                str(principal.tenant_id),
                RateLimitItemPerMinute(k.requests_per_minute_per_tenant),
                RateLimitItemPerMinute(k.tokens_per_minute_per_tenant),
            )
        ]
        if principal.key_id is not None:
            key = _Scope(
                "key",
                str(principal.key_id),
                RateLimitItemPerMinute(k.requests_per_minute_per_key),
                RateLimitItemPerMinute(k.tokens_per_minute_per_key),
            )
            scopes.insert(0, key)
        return scopes

    def admit(self, principal: Principal) -> Meter:
        """Count one request against every scope; 429 if a scope has no requests or tokens left."""
        scopes = self.scopes(principal)
        for s in scopes:
            if not self.tokens.test(s.tokens, "tokens", s.kind, s.ident):
                raise self._refusal(scopes, f"token rate limit reached ({s.tokens.amount}/min per {s.kind})")
        for s in scopes:
            if not self.requests.hit(s.requests, "requests", s.kind, s.ident):
                raise self._refusal(
                    scopes, f"request rate limit reached ({s.requests.amount}/min per {s.kind})"
                )
        return Meter(self, scopes, self.headers(scopes))

    def charge(self, scopes: list[_Scope], tokens: int) -> None:
        for s in scopes:
            if not self.tokens.hit(s.tokens, "tokens", s.kind, s.ident, cost=tokens):
                # Over the limit: use up what is left, so that the next request waits.
                left = self.tokens.get_window_stats(s.tokens, "tokens", s.kind, s.ident).remaining
                if left > 0:
                    self.tokens.hit(s.tokens, "tokens", s.kind, s.ident, cost=left)

    def headers(self, scopes: list[_Scope]) -> dict[str, str]:
        """OpenAI's x-ratelimit-* headers for the tightest scope of each kind of limit."""
        now = time.time()
        out: dict[str, str] = {}
        for name, limiter, item_of in (
            ("requests", self.requests, lambda s: s.requests),
            ("tokens", self.tokens, lambda s: s.tokens),
        ):
            stats = [
                (limiter.get_window_stats(item_of(s), name, s.kind, s.ident), item_of(s)) for s in scopes
            ]
            window, item = min(stats, key=lambda pair: pair[0].remaining)
            out[f"x-ratelimit-limit-{name}"] = str(item.amount)
            out[f"x-ratelimit-remaining-{name}"] = str(max(0, window.remaining))
            out[f"x-ratelimit-reset-{name}"] = f"{max(0.0, window.reset_time - now):.0f}s"
        return out

    def _refusal(self, scopes: list[_Scope], message: str) -> ApiError:
        headers = self.headers(scopes)
        waits = [
            float(headers[f"x-ratelimit-reset-{n}"].removesuffix("s"))
            for n in ("requests", "tokens")
            if headers[f"x-ratelimit-remaining-{n}"] == "0"
        ]
        headers["Retry-After"] = str(max(1, math.ceil(max(waits, default=1.0))))
        return ApiError(429, "rate_limit_exceeded", message, headers=headers)


@traced("rate_limit")
def rate_limited(request: Request, principal: CurrentPrincipal, state: StateDep) -> Meter:
    """Admit the request under its key's and tenant's limits (ask, chat, search, agent runs)."""
    if not state.settings.limits.enabled:
        return Meter(None, [])
    limiter = state.extras.get("rate_limiter")
    if limiter is None:
        with _build_lock:
            if "rate_limiter" not in state.extras:
                storage = limit_storage(state.settings, state.engine)
                state.extras["rate_limiter"] = RateLimiter(state.settings, storage)
            limiter = state.extras["rate_limiter"]
    meter = limiter.admit(principal)
    request.state.rate_limit_headers = meter.headers  # added to the response by api/main.py
    return meter


RateLimit = Annotated[Meter, Depends(rate_limited)]


async def charging(events: AsyncIterator[dict], meter: Meter) -> AsyncIterator[dict]:
    """Pass pipeline events through, charging the `done` event's token usage to the meter."""
    async for event in events:
        if event["type"] == "done":
            await asyncio.to_thread(meter.charge, event.get("usage") or {})
        yield event
