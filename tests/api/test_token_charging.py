"""Tokens charged on every path: reserved before a generation (prompt estimate + max_tokens),
settled on actual use, partial use charged when a client leaves; agent runs charge each LLM call,
background ones included (the packaged SmolLM2 in our engine, real Redis counters)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import httpx
import pytest
from fastapi.testclient import TestClient

from api.charging import Reservation, charging, reserve
from api.deps import DEFAULT_TENANT_ID, Principal
from api.main import build_state, create_app
from api.mcp.stdio import key_request
from api.mcp.tools import Caller, StartRunArgs, start_agent_run
from api.ratelimit import Meter, RateLimiter, limit_storage
from core.database import session_scope
from core.errors import ClientError
from core.settings.limits import LimitSettings
from core.tenancy import create_api_key, get_or_create_tenant
from inference.provider import LLMProvider
from tests.support.http import running
from usecases.agent_runs import read_run

pytestmark = pytest.mark.integration

RUNS, LIMIT = 25, 4000


def _limited(settings, storage_url=None, auth=True, **knobs):
    limits = LimitSettings(storage_url=storage_url, key_prefix=f"gwtest-{uuid.uuid4().hex[:8]}", **knobs)
    return settings.model_copy(update={"auth_required": auth, "limits": limits})


def _state(settings, client):
    """API state on `settings`, sharing the session's LLM provider (its engine loaded once)."""
    state = build_state(settings)
    state.llm = client.app.state.groundwork.llm
    return state


def _remaining(limiter: RateLimiter, scope, counter: str = "tokens") -> int:
    item = scope.tokens[counter]
    return limiter.tokens.get_window_stats(item, counter, scope.kind, scope.ident).remaining


@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_reservations_hold_the_worst_case_and_settle_on_actual_use(settings, db_engine, redis_url, backend):
    strict = _limited(
        settings,
        redis_url if backend == "redis" else None,
        tokens_per_minute_per_key=1000,
        output_tokens_per_minute_per_key=300,
    )
    limiter = RateLimiter(strict, limit_storage(strict, db_engine))
    meter = limiter.admit(Principal(uuid.uuid4(), uuid.uuid4(), frozenset({"read"})))
    key = meter.scopes[0]
    held = reserve(meter, 400, 250)  # 650 of 1000 held before any token is made
    assert _remaining(limiter, key) == 350 and _remaining(limiter, key, "output_tokens") == 50
    with pytest.raises(ClientError) as refused:
        reserve(meter, 100, 100)  # output counter: 100 > 50 left
    assert refused.value.status == 429 and "output token rate limit" in refused.value.message
    assert _remaining(limiter, key) == 350  # the refused reservation took nothing
    held.settle({"prompt_tokens": 380, "completion_tokens": 20})
    held.settle({"prompt_tokens": 999, "completion_tokens": 999})  # settles once
    assert _remaining(limiter, key) == 600 and _remaining(limiter, key, "output_tokens") == 280
    tenant = meter.scopes[1]
    assert _remaining(limiter, tenant) == strict.limits.tokens_per_minute_per_tenant - 400
    cut = reserve(meter, 100, 200)
    cut.settle_partial(5)  # the client left after 5 tokens: prompt + 5 charged
    assert _remaining(limiter, key) == 495


def test_25_background_agent_runs_stay_within_5_percent_of_the_key_token_limit(
    settings, session_factory, client
):
    strict = _limited(settings, tokens_per_minute_per_key=LIMIT)
    with session_scope(session_factory) as session:
        _, plain = create_api_key(session, get_or_create_tenant(session, f"tok-{uuid.uuid4().hex[:8]}"), "t")
    key = {"authorization": f"Bearer {plain}"}
    body = {"input": "What is 17 * 23?", "tools": ["calculator"], "background": True, "agent": "react"}
    state = _state(strict, client)
    with TestClient(create_app(strict, state)) as limited:
        began = time.monotonic()
        started = [limited.post("/v1/agents/runs", json=body, headers=key) for _ in range(RUNS)]
        assert {r.status_code for r in started} <= {202, 429}, [r.text for r in started]
        ids = {r.json()["id"] for r in started if r.status_code == 202}
        deadline = time.monotonic() + 600
        while True:
            runs = [
                r
                for r in client.get("/v1/agents/runs?limit=100", headers=key).json()["data"]
                if r["id"] in ids
            ]
            if all(r["finished_at"] for r in runs) or time.monotonic() > deadline:
                break
            time.sleep(1)
        # NOTE: the limit is per minute: runs that cross a window boundary (a slow machine) may use the
        # next window's tokens too, so the bound is the limit of every window they touched.
        windows = int((time.monotonic() - began) // 60) + 2  # + the window a run straddles
        state.llm = LLMProvider(strict)  # the session's: not shut down with this app
    assert all(r["finished_at"] for r in runs), [r["status"] for r in runs]
    used = sum(r["usage"].get("prompt_tokens", 0) + r["usage"].get("completion_tokens", 0) for r in runs)
    stopped = [r for r in runs if "token rate limit" in (r["detail"] or "")]
    print(f"{len(ids)} background runs, {len(stopped)} stopped by the limit: {used} tokens of {LIMIT}/min")
    assert 0 < used <= LIMIT * 1.05 * windows, (used, windows)
    assert stopped and all(r["finish_reason"] == "budget_exhausted" for r in stopped)


def test_a_streamed_chat_cut_off_by_its_client_is_charged_for_what_it_made(settings, client):
    strict = _limited(settings, auth=False)
    state = _state(strict, client)
    app = create_app(strict, state)
    app.state.groundwork = state
    with running(app) as base, httpx.Client(base_url=base, timeout=120) as http:
        model = state.llm.backend().model_name
        body = {
            "model": model,
            "messages": [{"role": "user", "content": "Count to one hundred."}],
            "stream": True,
            "max_tokens": 400,
            "temperature": 0,
        }
        chunks = 0
        with http.stream("POST", "/v1/chat/completions", json=body) as resp:
            assert resp.status_code == 200
            for line in resp.iter_lines():
                chunks += line.startswith("data: ")
                if chunks >= 4:
                    break  # the client leaves mid-answer
        limiter = state.rate_limiter
        tenant = limiter.scopes(Principal(DEFAULT_TENANT_ID, None, frozenset()))[0]
        full = strict.limits.tokens_per_minute_per_tenant
        deadline = time.monotonic() + 20
        # settled when the stream closes: not the 400-token reservation, not nothing
        while full - _remaining(limiter, tenant) > 100 and time.monotonic() < deadline:
            time.sleep(0.2)
    state.engine.dispose()
    charged = full - _remaining(limiter, tenant)
    print(f"streamed chat cut after {chunks} chunks: {charged} tokens charged (reserved ~{400 + 15})")
    assert 3 <= charged < 100, charged


def test_a_refused_generation_gives_its_tokens_back_off_the_event_loop(monkeypatch):
    """Admission's 503 ends a stream before any token: its give-back (several storage round trips)
    ran on the event loop, once per request of a flooding tenant, and every other tenant waited."""
    settled: list[threading.Thread] = []

    def settle(self, usage):
        settled.append(threading.current_thread())
        self.settled = True

    monkeypatch.setattr(Reservation, "settle", settle)

    async def refused():
        raise ClientError(503, "overloaded", "too many answers at once")
        yield  # pragma: no cover - an async generator that fails at its first step

    async def first_event(events):
        with pytest.raises(ClientError):
            await anext(events)

    asyncio.run(first_event(charging(refused(), Reservation(Meter(None, []), 100, 50))))
    assert len(settled) == 1 and settled[0] is not threading.main_thread()

    async def one_token():
        yield {"type": "token", "text": "a"}
        yield {"type": "token", "text": "b"}

    async def client_gone(events):
        await anext(events)
        await events.aclose()  # a closing generator cannot wait: settled where it closes

    asyncio.run(client_gone(charging(one_token(), Reservation(Meter(None, []), 100, 50))))
    assert len(settled) == 2 and settled[1] is threading.main_thread()


def test_an_mcp_run_started_without_waiting_is_charged_to_the_callers_key(settings, session_factory, client):
    # NOTE: it was charged to the run's tenant with no key (the gate of a run resumed after a restart)
    # until the MCP tools took REST's `background` path (usecases/agent_segments.py).
    strict = _limited(settings, tokens_per_minute_per_key=LIMIT)
    with session_scope(session_factory) as session:
        tenant = get_or_create_tenant(session, f"mcp-{uuid.uuid4().hex[:8]}")
        row, plain = create_api_key(session, tenant, "t")
        principal = Principal(row.tenant_id, row.id, frozenset(row.scopes))
    state = _state(strict, client)
    args = StartRunArgs(input="What is 17 * 23?", tools=["calculator"], wait=False)

    async def main() -> dict:
        run = await start_agent_run(Caller(state, principal, key_request(plain)), args)
        assert run["status"] == "queued", run
        try:
            await state.agent_runner.wait(uuid.UUID(run["id"]))
            return read_run(state, principal.tenant_id, uuid.UUID(run["id"]))
        finally:
            await state.agent_runner.aclose()  # its checkpoint pool lives on this loop

    try:
        run = asyncio.run(main())
        used = run["usage"].get("prompt_tokens", 0) + run["usage"].get("completion_tokens", 0)
        key = state.rate_limiter.scopes(principal)[0]
        # the key's counter moved (by the calls' settled tokens; the usage's exact sum is not the point)
        assert used > 0 and _remaining(state.rate_limiter, key) < LIMIT, run["usage"]
    finally:
        state.engine.dispose()
