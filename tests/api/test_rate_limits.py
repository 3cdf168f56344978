"""Rate limits per key and tenant, on both shared storages (Redis, and the platform's Postgres when
no Redis is configured), and storage quotas."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from api.deps import Principal
from api.main import build_state, create_app
from api.ratelimit import RateLimiter, limit_storage
from core.database import session_scope
from core.errors import ClientError
from core.settings.limits import LimitSettings
from core.tenancy import create_api_key, get_or_create_tenant
from tests.support.http import running

pytestmark = pytest.mark.integration

LIMIT = 100
CLIENTS, PER_CLIENT = 8, 30


@pytest.fixture(params=["redis", "postgres"])
def storage_url(request) -> str | None:
    """The counters' storage: Redis, or (unset, no Redis broker) the platform's database."""
    return request.getfixturevalue("redis_url") if request.param == "redis" else None


def _limited(settings, storage_url, **knobs):
    limits = LimitSettings(storage_url=storage_url, key_prefix=f"gwtest-{uuid.uuid4().hex[:8]}", **knobs)
    return settings.model_copy(update={"auth_required": True, "limits": limits})


def _key(session_factory, tenant: str) -> dict:
    with session_scope(session_factory) as session:
        _, plain = create_api_key(session, get_or_create_tenant(session, tenant), "rl")
    return {"authorization": f"Bearer {plain}"}


def test_request_limit_holds_within_5_percent_under_8_concurrent_clients(
    settings, storage_url, session_factory
):
    strict = _limited(settings, storage_url, requests_per_minute_per_key=LIMIT)
    key = _key(session_factory, f"rl-{uuid.uuid4().hex[:8]}")
    state = build_state(strict)
    app = create_app(strict, state)
    app.state.groundwork = state
    with running(app) as base, httpx.Client(base_url=base, headers=key, timeout=60) as http:
        cid = http.post("/v1/collections", json={"name": "rl"}).json()["id"]

        def client(_: int) -> list[httpx.Response]:
            with httpx.Client(base_url=base, headers=key, timeout=60) as own:
                return [
                    own.post(f"/v1/collections/{cid}/search", json={"query": "x", "mode": "bm25"})
                    for _ in range(PER_CLIENT)
                ]

        start = time.monotonic()
        with ThreadPoolExecutor(CLIENTS) as pool:
            responses = [r for batch in pool.map(client, range(CLIENTS)) for r in batch]
        elapsed = time.monotonic() - start
    state.engine.dispose()
    assert elapsed < 50, elapsed  # all inside one window
    ok = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code == 429]
    assert len(ok) + len(refused) == CLIENTS * PER_CLIENT, {r.status_code for r in responses}
    assert abs(len(ok) - LIMIT) <= LIMIT * 0.05, len(ok)
    where = storage_url or "postgres"
    print(f"rate limit {LIMIT}/min ({where}), {CLIENTS}x{PER_CLIENT} requests: {len(ok)} in {elapsed:.1f}s")
    sample = refused[0]
    assert int(sample.headers["retry-after"]) >= 1
    assert sample.headers["x-ratelimit-limit-requests"] == str(LIMIT)
    assert sample.headers["x-ratelimit-remaining-requests"] == "0"
    assert sample.json()["error"]["code"] == "rate_limit_exceeded"
    assert ok[0].headers["x-ratelimit-limit-tokens"].isdigit()


def test_tokens_are_charged_after_the_answer_and_refuse_the_next_request(settings, storage_url, db_engine):
    strict = _limited(settings, storage_url, tokens_per_minute_per_key=100)
    limiter = RateLimiter(strict, limit_storage(strict, db_engine))
    caller = Principal(uuid.uuid4(), uuid.uuid4(), frozenset({"read"}))
    meter = limiter.admit(caller)
    assert meter.headers["x-ratelimit-remaining-tokens"] == "100"
    meter.charge({"prompt_tokens": 90, "completion_tokens": 30})  # over: the window is used up
    with pytest.raises(ClientError) as refused:
        limiter.admit(caller)
    assert refused.value.status == 429 and "token rate limit" in refused.value.message
    assert int(refused.value.headers["Retry-After"]) >= 1
    other = Principal(uuid.uuid4(), uuid.uuid4(), frozenset({"read"}))
    limiter.admit(other)  # another tenant's key is not affected


def test_an_admission_refused_for_its_request_count_keeps_no_token_reservation(
    settings, storage_url, db_engine
):
    """Admission takes a generation's reservation with the request (api/charging.py
    `admit_reserving`): when the request count then refuses it, the tokens are not kept (Postgres
    rolls the transaction back; on Redis they are given back), and a reservation the tokens
    cannot hold takes no request."""
    strict = _limited(settings, storage_url, requests_per_minute_per_key=2, tokens_per_minute_per_key=1_000)
    limiter = RateLimiter(strict, limit_storage(strict, db_engine))
    caller = Principal(uuid.uuid4(), uuid.uuid4(), frozenset({"read"}))
    with pytest.raises(ClientError) as too_big:
        limiter.admit(caller, {"tokens": 1_001})
    assert too_big.value.status == 429 and "token rate limit" in too_big.value.message
    limiter.admit(caller, {"tokens": 300})
    meter = limiter.admit(caller, {"tokens": 300})  # the second request: the first was not counted
    assert meter.headers["x-ratelimit-remaining-tokens"] == "400"
    with pytest.raises(ClientError) as refused:
        limiter.admit(caller, {"tokens": 300})
    assert "request rate limit" in refused.value.message
    assert limiter.headers(meter.scopes)["x-ratelimit-remaining-tokens"] == "400"


def test_document_quota_refuses_the_upload_that_would_exceed_it(settings, session_factory):
    strict = _limited(settings, None, max_documents_per_tenant=2)
    key = _key(session_factory, f"quota-{uuid.uuid4().hex[:8]}")
    with TestClient(create_app(strict)) as client:
        client.post("/v1/collections", json={"name": "q"}, headers=key)
        files = [("files", (f"{i}.txt", f"text {i}".encode(), "text/plain")) for i in range(3)]
        resp = client.post("/v1/collections/q/documents", files=files, headers=key)
        assert resp.status_code == 413 and resp.json()["error"]["code"] == "quota_exceeded", resp.text
        ok = client.post("/v1/collections/q/documents", files=files[:2], headers=key)
        assert ok.status_code == 202, ok.text


def test_api_processes_without_redis_share_their_counters_in_postgres(settings, database_url):
    """Two limiters on their own engines (two API processes) admit LIMIT requests between them."""
    from core.database import make_engine

    strict = _limited(settings, None, requests_per_minute_per_key=5)
    engines = [make_engine(database_url, pool_size=1) for _ in range(2)]
    limiters = [RateLimiter(strict, limit_storage(strict, e)) for e in engines]
    caller = Principal(uuid.uuid4(), uuid.uuid4(), frozenset({"read"}))
    admitted = 0
    for i in range(10):
        try:
            limiters[i % 2].admit(caller)
            admitted += 1
        except ClientError as refused:
            assert refused.status == 429
    for e in engines:
        e.dispose()
    assert admitted == 5


def test_token_reservations_hold_the_limit_exactly_under_8_concurrent_clients(
    settings, storage_url, db_engine
):
    """Sliding-window hits from 8 threads at once: never more than the limit is taken (the Postgres
    storage decides each hit in one statement, on the row it locks), and the window fills up."""
    strict = _limited(settings, storage_url, tokens_per_minute_per_key=500)
    limiter = RateLimiter(strict, limit_storage(strict, db_engine))
    scopes = limiter.scopes(Principal(uuid.uuid4(), uuid.uuid4(), frozenset({"read"})))

    def client(_: int) -> int:
        taken = 0
        for _ in range(20):
            try:
                limiter.reserve(scopes, {"tokens": 10})
                taken += 10
            except ClientError as refused:
                assert refused.status == 429
        return taken

    with ThreadPoolExecutor(CLIENTS) as pool:
        taken = sum(pool.map(client, range(CLIENTS)))
    assert taken == 500, taken  # 1,600 asked for: exactly the limit taken, not one unit more
    limiter.give_back(scopes, {"tokens": 30})
    limiter.reserve(scopes, {"tokens": 30})  # what was given back can be taken again
    with pytest.raises(ClientError):
        limiter.reserve(scopes, {"tokens": 10})


def test_an_admitted_request_costs_few_round_trips_to_the_postgres_counters(settings, db_engine):
    """Admission (alone, and with a generation's token reservation) and a settlement's refund, on the
    Postgres storage: every round trip there is a wait for the database (and, under load, for a
    CPU), on every limited request."""
    strict = _limited(settings, None, tokens_per_minute_per_key=10_000, tokens_per_minute_per_tenant=20_000)
    limiter = RateLimiter(strict, limit_storage(strict, db_engine))
    caller, other = (Principal(uuid.uuid4(), uuid.uuid4(), frozenset({"read"})) for _ in range(2))
    limiter.admit(other)  # the storage's first call also purges expired rows
    sent: list[str] = []

    def listen(conn, cursor, statement, *_) -> None:
        sent.append(statement)

    event.listen(limiter.database_engine, "before_cursor_execute", listen)
    counts = []
    for call in (
        lambda: limiter.admit(caller),
        lambda: limiter.admit(caller, {"tokens": 300}),
        lambda: limiter.give_back(limiter.scopes(caller), {"tokens": 200}),
    ):
        before = len(sent)
        call()
        counts.append(len(sent) - before)
    event.remove(limiter.database_engine, "before_cursor_execute", listen)
    windows = [
        limiter.tokens.get_window_stats(s.tokens["tokens"], "tokens", s.kind, s.ident)
        for s in limiter.scopes(caller)
    ]
    assert [w.remaining for w in windows] == [9_900, 19_900]  # the refund reached every counter
    limiter.close()
    # Two scopes (key, tenant). Before one-statement hits: 14 for admission, then 6 for a
    # reservation and 8 for a refund; before headers answered from the windows admission had just
    # read and taken: 10, 2 and 4; before the reservation was taken in admission's transaction and
    # the refund was one statement: 6, then 6 + 2 with the reservation, and 4.
    assert counts == [6, 6, 1], counts


def test_admission_headers_match_the_counters_as_read_afterwards(settings, db_engine):
    """Admission answers its `x-ratelimit-*` headers from the windows it read and took in its
    transaction (api/limit_storage.py), its reservation's included; read again afterwards, the
    counters say the same."""
    strict = _limited(settings, None, requests_per_minute_per_key=50, tokens_per_minute_per_key=10_000)
    limiter = RateLimiter(strict, limit_storage(strict, db_engine))
    caller = Principal(uuid.uuid4(), uuid.uuid4(), frozenset({"read"}))
    for hits in (1, 2, 3):
        meter = limiter.admit(caller, {"tokens": 100} if hits > 1 else None)
        again = limiter.headers(meter.scopes)
        assert meter.headers["x-ratelimit-remaining-requests"] == str(50 - hits), meter.headers
        assert meter.headers["x-ratelimit-remaining-tokens"] == str(10_000 - 100 * (hits - 1))
        for name in ("requests", "tokens"):
            assert meter.headers[f"x-ratelimit-remaining-{name}"] == again[f"x-ratelimit-remaining-{name}"]
            reset, reset_again = (int(h[f"x-ratelimit-reset-{name}"][:-1]) for h in (meter.headers, again))
            assert abs(reset - reset_again) <= 1, (meter.headers, again)
    limiter.close()
