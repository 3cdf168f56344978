"""Rate limits per API key and per tenant, requests and tokens per minute, with the `limits` library.

Requests are counted on admission (moving window: exact). Tokens are reserved before a generation
(the prompt's estimate + `max_tokens`, api/charging.py) and settled on actual use when it ends, so a
burst of long generations cannot pass admission before any is counted (sliding-window counters: a
token is one count, not one entry). Three token counters per scope: prompt + completion, and,
when set, prompt (input) and completion (output) apart. Refusals are 429 with `Retry-After`; every
limited response carries OpenAI's `x-ratelimit-*` headers for the tightest of its limits.
"""

from __future__ import annotations

import math
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request
from limits import RateLimitItemPerMinute
from limits.storage import Storage, storage_from_string
from limits.strategies import MovingWindowRateLimiter, SlidingWindowCounterRateLimiter
from sqlalchemy import Engine

from api.deps import CurrentPrincipal, Principal, StateDep
from api.limit_storage import PostgresStorage
from api.state import AppState
from core.errors import ClientError
from core.settings import Settings
from core.tracing import traced


@dataclass
class _Scope:
    kind: str  # key | tenant
    ident: str
    requests: RateLimitItemPerMinute
    tokens: dict[str, RateLimitItemPerMinute]  # counter (tokens, input_tokens, output_tokens) -> limit


def token_costs(prompt: int, completion: int) -> dict[str, int]:
    """What `prompt` + `completion` tokens cost on each token counter."""
    return {"tokens": prompt + completion, "input_tokens": prompt, "output_tokens": completion}


@dataclass
class Meter:
    """What a limited request holds: its headers, and its scopes for charging tokens
    (api/charging.py reserves and settles; `charge` adds used tokens without a reservation)."""

    limiter: RateLimiter | None
    scopes: list[_Scope]
    headers: dict[str, str] = field(default_factory=dict)

    def charge(self, usage: dict) -> None:
        prompt, completion = int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
        if self.limiter is not None and prompt + completion > 0:
            self.limiter.charge(self.scopes, token_costs(prompt, completion))


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
        self.storage = storage

    def _one_transaction(self) -> AbstractContextManager[None]:
        """A request's calls in one transaction of the Postgres storage (Redis has no such need)."""
        return self.storage.pinned() if isinstance(self.storage, PostgresStorage) else nullcontext()

    @property
    def database_engine(self) -> Engine | None:
        """The storage's own engine, when the counters live in Postgres (its round trips count too)."""
        return self.storage.engine if isinstance(self.storage, PostgresStorage) else None

    def close(self) -> None:
        if isinstance(self.storage, PostgresStorage):
            self.storage.close()

    def _scope(self, kind: str, ident: str) -> _Scope:
        k = self.knobs
        per = {
            "tokens": getattr(k, f"tokens_per_minute_per_{kind}"),
            "input_tokens": getattr(k, f"input_tokens_per_minute_per_{kind}"),
            "output_tokens": getattr(k, f"output_tokens_per_minute_per_{kind}"),
        }
        return _Scope(
            kind,
            ident,
            RateLimitItemPerMinute(getattr(k, f"requests_per_minute_per_{kind}")),
            {name: RateLimitItemPerMinute(n) for name, n in per.items() if n is not None},
        )

    def scopes(self, principal: Principal) -> list[_Scope]:
        scopes = [self._scope("tenant", str(principal.tenant_id))]
        if principal.key_id is not None:
            scopes.insert(0, self._scope("key", str(principal.key_id)))
        return scopes

    def admit(self, principal: Principal, reserve: dict[str, int] | None = None) -> Meter:
        """Count one request against every scope, and take `reserve` from the token counters
        (`reserve` below) in the same transaction; 429 if a scope has no requests or tokens left."""
        with self._one_transaction():
            return self._admit(self.scopes(principal), reserve or {})

    def _admit(self, scopes: list[_Scope], costs: dict[str, int]) -> Meter:
        for s in scopes:
            for name, item in s.tokens.items():
                if costs.get(name, 0) <= 0 and not self.tokens.test(item, name, s.kind, s.ident):
                    raise self._refusal(
                        scopes, f"{_words(name)} rate limit reached ({item.amount}/min per {s.kind})"
                    )
        taken = self._reserve(scopes, costs)  # the counters a reservation takes need no test
        for s in scopes:
            if not self.requests.hit(s.requests, "requests", s.kind, s.ident):
                self._give_back(taken)  # the Postgres storage rolls back; a Redis one needs this
                raise self._refusal(
                    scopes, f"request rate limit reached ({s.requests.amount}/min per {s.kind})"
                )
        return Meter(self, scopes, self.headers(scopes))

    def charge(self, scopes: list[_Scope], costs: dict[str, int]) -> None:
        """Add used tokens; over a limit, use up what is left of it, so that the next request waits."""
        with self._one_transaction():
            self._charge(scopes, costs)

    def _charge(self, scopes: list[_Scope], costs: dict[str, int]) -> None:
        for s in scopes:
            for name, item in s.tokens.items():
                cost = costs.get(name, 0)
                if cost <= 0 or self.tokens.hit(item, name, s.kind, s.ident, cost=cost):
                    continue
                left = self.tokens.get_window_stats(item, name, s.kind, s.ident).remaining
                if left > 0:
                    self.tokens.hit(item, name, s.kind, s.ident, cost=left)

    def reserve(self, scopes: list[_Scope], costs: dict[str, int]) -> None:
        """Take `costs` from every counter of every scope, or none of them: 429 when one lacks room."""
        with self._one_transaction():
            self._reserve(scopes, costs)

    def _reserve(self, scopes: list[_Scope], costs: dict[str, int]) -> list[tuple[_Scope, str, int]]:
        taken: list[tuple[_Scope, str, int]] = []
        for s in scopes:
            for name, item in s.tokens.items():
                cost = costs.get(name, 0)
                if cost <= 0:
                    continue
                if not self.tokens.hit(item, name, s.kind, s.ident, cost=cost):
                    self._give_back(taken)
                    raise self._refusal(
                        scopes,
                        f"{_words(name)} rate limit reached: this request may use {cost} and "
                        f"{self.tokens.get_window_stats(item, name, s.kind, s.ident).remaining} of "
                        f"{item.amount}/min per {s.kind} are left",
                    )
                taken.append((s, name, cost))
        return taken

    def give_back(self, scopes: list[_Scope], costs: dict[str, int]) -> None:
        """Return reserved tokens that were not used."""
        with self._one_transaction():
            self._give_back([(s, name, costs.get(name, 0)) for s in scopes for name in s.tokens])

    def _give_back(self, taken: list[tuple[_Scope, str, int]]) -> None:
        taken = [(s, name, cost) for s, name, cost in taken if cost > 0]
        if isinstance(self.storage, PostgresStorage):
            refunds = [
                (s.tokens[n].key_for(n, s.kind, s.ident), s.tokens[n].get_expiry(), c) for s, n, c in taken
            ]
            if refunds:
                self.storage.refund_sliding_windows(refunds)  # one statement for them all
            return
        for s, name, cost in taken:
            item = s.tokens[name]
            key = item.key_for(name, s.kind, s.ident)
            # NOTE: at most the current window's count: a reservation made in the previous window
            # is not refunded into this one, which would let the sum exceed the limit.
            _, _, current, _ = self.tokens.storage.get_sliding_window(key, item.get_expiry())
            refund = min(cost, current)
            if refund > 0:
                self.tokens.hit(item, name, s.kind, s.ident, cost=-refund)

    def headers(self, scopes: list[_Scope]) -> dict[str, str]:
        """OpenAI's x-ratelimit-* headers for the tightest scope of each kind of limit."""
        now = time.time()
        out: dict[str, str] = {}
        for name, limiter, item_of in (
            ("requests", self.requests, lambda s: s.requests),
            ("tokens", self.tokens, lambda s: s.tokens["tokens"]),
        ):
            stats = [
                (limiter.get_window_stats(item_of(s), name, s.kind, s.ident), item_of(s)) for s in scopes
            ]
            window, item = min(stats, key=lambda pair: pair[0].remaining)
            out[f"x-ratelimit-limit-{name}"] = str(item.amount)
            out[f"x-ratelimit-remaining-{name}"] = str(max(0, window.remaining))
            out[f"x-ratelimit-reset-{name}"] = f"{max(0.0, window.reset_time - now):.0f}s"
        return out

    def _refusal(self, scopes: list[_Scope], message: str) -> ClientError:
        headers = self.headers(scopes)
        waits = [
            float(headers[f"x-ratelimit-reset-{n}"].removesuffix("s"))
            for n in ("requests", "tokens")
            if headers[f"x-ratelimit-remaining-{n}"] == "0"
        ]
        headers["Retry-After"] = str(max(1, math.ceil(max(waits, default=1.0))))
        return ClientError(429, "rate_limit_exceeded", message, headers=headers)


def _words(counter: str) -> str:
    return {"tokens": "token", "input_tokens": "input token", "output_tokens": "output token"}[counter]


def build_rate_limiter(state: AppState) -> RateLimiter | None:
    """The process's limiter (None with limits off)."""
    if not state.settings.limits.enabled:
        return None
    return RateLimiter(state.settings, limit_storage(state.settings, state.engine))


def admit(state: AppState, principal: Principal, reserve: dict[str, int] | None = None) -> Meter:
    """Admit one request of `principal` (any entry point: HTTP routes, the MCP server), taking
    `reserve` tokens with it; 429 when over."""
    limiter = state.rate_limiter
    return Meter(None, []) if limiter is None else limiter.admit(principal, reserve)


def meter_of(state: AppState, principal: Principal) -> Meter:
    """A meter for work already admitted (a run resumed after a restart): charges, counts no request."""
    limiter = state.rate_limiter
    return Meter(None, []) if limiter is None else Meter(limiter, limiter.scopes(principal))


@traced("rate_limit")
def limit_request(
    request: Request, principal: Principal, state: AppState, reserve: dict[str, int] | None = None
) -> Meter:
    """Admit an HTTP request (and its reservation); its headers go on the response (api/main.py)."""
    meter = admit(state, principal, reserve)
    request.state.rate_limit_headers = meter.headers
    return meter


def rate_limited(request: Request, principal: CurrentPrincipal, state: StateDep) -> Meter:
    """Admit the request under its key's and tenant's limits (search, agent runs: the routes that
    generate admit with their reservation, api/charging.py `admit_reserving`)."""
    return limit_request(request, principal, state)


RateLimit = Annotated[Meter, Depends(rate_limited)]
