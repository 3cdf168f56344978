"""Failures of what the API depends on reach clients as 503 + Retry-After (database, engine), streams
end with an `error` event, and writes are committed before the response is sent."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, text

from api.main import build_state, create_app
from api.streaming import ending_with_error_event, sse
from core.database import make_engine, make_session_factory
from inference.protocol import EngineOverloadedError
from tests.support.http import running

pytestmark = pytest.mark.integration


def test_database_outage_is_a_503_with_retry_after(settings):
    app = create_app(settings)
    with TestClient(app) as client:
        state = app.state.groundwork
        healthy_engine, healthy_sessions = state.engine, state.sessions
        # NOTE: a server that refuses connections, as a stopped Postgres does.
        dead = make_engine("postgresql://nobody@127.0.0.1:9/none", connect_args={"connect_timeout": 2})
        state.engine, state.sessions = dead, make_session_factory(dead)
        try:
            for method, path in (("get", "/v1/collections"), ("post", "/v1/collections")):
                resp = client.request(method, path, json={"name": "x"})
                assert resp.status_code == 503, resp.text
                assert resp.headers["retry-after"].isdigit()
                assert resp.json()["error"]["code"] == "database_unavailable"
                assert "127.0.0.1" not in resp.text  # no connection details for clients
            ready = client.get("/readyz")
            assert ready.status_code == 503 and "Connection refused" not in ready.text
        finally:
            state.engine, state.sessions = healthy_engine, healthy_sessions
            dead.dispose()
        assert client.get("/v1/collections").status_code == 200


def test_full_engine_queue_is_a_503_with_retry_after(settings):
    app = create_app(settings)

    @app.get("/overloaded")
    def overloaded():
        raise EngineOverloadedError("waiting queue is full", retry_after_s=2.4)

    with TestClient(app) as client:
        resp = client.get("/overloaded")
    assert resp.status_code == 503 and resp.headers["retry-after"] == "2"
    assert resp.json()["error"]["code"] == "engine_overloaded"


def test_a_stopped_api_closes_its_checkpoint_pool(settings):
    # NOTE: CI hung 10 minutes on the shutdown of a test app: the pool was left open, and
    # psycopg_pool's tasks swallow a cancel that arrives mid-job, so the loop's end waited for them.
    app = create_app(settings)
    with TestClient(app) as client:
        runner = app.state.groundwork.agent_runner
        client.portal.call(runner.saver)  # as a run's first step does, on the app's loop
        pool = runner._pool
        assert pool is not None and not pool.closed
    assert pool.closed


def test_stream_failures_end_with_an_error_event():
    async def events():
        yield sse("token", {})
        raise EngineOverloadedError("full")

    async def collect():
        return [chunk.encode().decode() async for chunk in ending_with_error_event(events())]

    chunks = asyncio.run(collect())
    assert chunks[0].startswith("event: token")
    name, data = chunks[-1].strip().splitlines()
    assert name == "event: error"
    assert json.loads(data.removeprefix("data: "))["error"] == {
        "code": "engine_overloaded",
        "message": "the generator is at capacity; retry later",
        "status": 503,
    }


def test_unauthorized_answers_carry_the_bearer_challenge(settings):
    strict = settings.model_copy(update={"auth_required": True})
    with TestClient(create_app(strict)) as client:
        for headers in ({}, {"authorization": "Basic abc"}, {"authorization": "Bearer nope"}):
            resp = client.get("/v1/collections", headers=headers)
            assert resp.status_code == 401
            assert resp.headers["www-authenticate"].startswith("Bearer")


def test_writes_are_committed_before_the_response_is_sent(settings, db_engine):
    """Commits are slowed down; a client that reads right after 201 must still see the row.

    Fails where the session dependency commits after sending (FastAPI >= 0.118 default)."""
    state = build_state(settings)
    slow = threading.Event()

    @event.listens_for(state.sessions, "before_commit")
    def _slow_commit(session):
        if slow.is_set():
            time.sleep(0.5)

    app = create_app(settings, state)
    app.state.groundwork = state  # the loopback server runs without lifespan
    name = f"committed-{time.time_ns()}"
    try:
        with running(app) as base:
            slow.set()
            resp = httpx.post(f"{base}/v1/collections", json={"name": name}, timeout=30)
            assert resp.status_code == 201, resp.text
            with db_engine.connect() as conn:
                found = conn.execute(text("SELECT count(*) FROM collections WHERE name = :n"), {"n": name})
                assert found.scalar_one() == 1
    finally:
        slow.clear()
        state.engine.dispose()
