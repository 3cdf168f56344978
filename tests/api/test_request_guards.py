"""Requests refused before they cost anything, and answers that used to be 500s: bodies over the
cap and requests without a key are answered from the headers (the body is never sent here),
chat parameters the platform does not implement are 400s, schemas that are too deep or too large
are 400s while other clients are served, and every response (500s too) is in the request log."""

from __future__ import annotations

import logging
import socket
import statistics
import threading
import time
import uuid
from collections.abc import Callable

import httpx
import pytest
from fastapi.testclient import TestClient

from api.main import build_state, create_app
from core.database import session_scope
from core.tenancy import create_api_key, get_or_create_tenant
from tests.support.http import running

pytestmark = pytest.mark.integration

USER = [{"role": "user", "content": "hi"}]


def _key(session_factory, tenant: str, scopes=None) -> dict:
    with session_scope(session_factory) as session:
        _, plain = create_api_key(session, get_or_create_tenant(session, tenant), "g", scopes)
    return {"authorization": f"Bearer {plain}"}


@pytest.fixture(scope="module")
def strict(settings):
    return settings.model_copy(update={"auth_required": True})


@pytest.fixture(scope="module")
def server(strict):
    """The API with auth required on a real loopback socket."""
    state = build_state(strict)
    app = create_app(strict, state)
    app.state.groundwork = state
    with running(app) as base:
        yield base
    state.engine.dispose()


def _raw_post(base: str, path: str, headers: dict, sent: bytes) -> tuple[int, float]:
    """POST announcing a 200 MB body but sending only `sent`; the status line and how long it took."""
    host, port = base.removeprefix("http://").split(":")
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", "Content-Type: application/json"]
    lines += [f"{k}: {v}" for k, v in headers.items()] + ["Content-Length: 200000000", "", ""]
    start = time.perf_counter()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall("\r\n".join(lines).encode() + sent)
        status = sock.recv(4096).split(b"\r\n", 1)[0]
    return int(status.split()[1]), time.perf_counter() - start


def test_a_200_mb_body_is_refused_from_its_headers(server, session_factory):
    key = _key(session_factory, f"g-{uuid.uuid4().hex[:6]}")
    head = b'{"model": "x", "messages": ['
    assert _raw_post(server, "/v1/chat/completions", {}, head)[0] == 401  # no key: 401 before the body
    status, took = _raw_post(server, "/v1/chat/completions", {"authorization": "Bearer gw_bogus"}, head)
    assert status == 413, status  # a key, checked after the body: the cap answers first
    assert _raw_post(server, "/v1/ask", key, head)[0] == 413
    print(f"200 MB JSON body announced: 401/413 in {took * 1000:.0f} ms with {len(head)} bytes sent")

    def chunks():  # no Content-Length: the bytes are counted as they come
        for _ in range(100):
            yield b" " * 100_000

    with httpx.Client(base_url=server, headers=key, timeout=30) as http:
        chunked = http.post("/v1/ask", content=chunks(), headers={"content-type": "application/json"})
        assert chunked.status_code == 413 and chunked.json()["error"]["code"] == "body_too_large"
        many = http.post("/v1/chat/completions", json={"model": "rag/x", "messages": USER * 1001})
        assert many.status_code == 422 and "messages" in many.text, many.text
        # Public routes and routes without a body are not affected.
        assert http.get("/healthz").status_code == 200


def test_every_v1_route_takes_a_key(settings):
    """The body guard answers 401 for any /v1 path without credentials: none may be public."""
    spec = create_app(settings).openapi()
    public = [(m, p) for p, ops in spec["paths"].items() for m, op in ops.items() if "security" not in op]
    assert public and not [p for _, p in public if p.startswith("/v1/")], public


def test_unimplemented_chat_parameters_and_bad_agent_tasks_are_4xx(server, session_factory):
    key = _key(session_factory, f"g-{uuid.uuid4().hex[:6]}")
    with httpx.Client(base_url=server, headers=key, timeout=30) as http:

        def chat(**body) -> httpx.Response:
            return http.post("/v1/chat/completions", json={"model": "rag/", "messages": USER, **body})

        for body, code in (
            ({"n": 3}, "unsupported_parameter"),
            ({"logprobs": True, "top_logprobs": 1000}, "unsupported_parameter"),
            ({"top_logprobs": 1000}, "unsupported_parameter"),
            ({"frequency_penalty": 0.5}, "unsupported_parameter"),
            ({"temperatur": 0.2}, "unknown_parameter"),
        ):
            refused = chat(**body)
            assert refused.status_code == 400 and refused.json()["error"]["code"] == code, (
                body,
                refused.text,
            )
        # Defaults are accepted (the request goes on, to the unnamed collection's 400).
        accepted = chat(n=1, logprobs=False, user="u", stream_options={"include_usage": True})
        assert accepted.status_code == 400 and "rag/<collection>" in accepted.text, accepted.text
        for task in ("", "x" * 4001):
            messages = [{"role": "user", "content": task}]
            run = http.post("/v1/chat/completions", json={"model": "agent/react", "messages": messages})
            assert run.status_code == 422 and "messages[-1].content" in run.text, run.text


def _nested(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


def test_oversized_schemas_are_400s_while_other_clients_are_served(server, session_factory):
    key = _key(session_factory, f"g-{uuid.uuid4().hex[:6]}")
    enum = {"type": "string", "enum": [f"value-{i:06d}" for i in range(100_000)]}  # 1.4 MB
    tool = {"type": "function", "function": {"name": "f", "parameters": _nested(100)}}
    bodies = {
        "deep response_format": {"response_format": _schema(_nested(100))},
        "deep tool": {"tools": [tool]},
        "100,000-value enum": {"response_format": _schema(enum)},
        "100,000 choices": {"guided_choice": enum["enum"]},
    }
    latencies: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        with httpx.Client(base_url=server, timeout=30) as other:
            other.get("/healthz")  # connected and warm
            while not stop.is_set():
                start = time.perf_counter()
                assert other.get("/healthz").status_code == 200
                latencies.append(time.perf_counter() - start)
                time.sleep(0.01)

    def probed(during: Callable[[], None]) -> list[float]:
        latencies.clear()
        stop.clear()
        prober = threading.Thread(target=probe)
        prober.start()
        try:
            during()
        finally:
            stop.set()
            prober.join()
        return list(latencies)

    def refusals() -> None:
        with httpx.Client(base_url=server, headers=key, timeout=60) as http:
            for name, body in bodies.items():
                resp = http.post("/v1/chat/completions", json={"model": "m", "messages": USER, **body})
                assert resp.status_code == 400, (name, resp.text)
                assert resp.json()["error"]["code"] == "invalid_request", (name, resp.text)

    with httpx.Client(base_url=server, headers=key, timeout=60) as http:  # warm: auth, limiter, admission
        assert (
            http.post("/v1/chat/completions", json={"model": "m", "messages": USER, "n": 2}).status_code
            == 400
        )
    idle = probed(lambda: time.sleep(1.0))
    loaded = probed(refusals)
    ms = lambda values: f"median {statistics.median(values) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms"  # noqa: E731
    print(f"/healthz from another client: idle {ms(idle)}; during the 4 refusals {ms(loaded)}")
    assert loaded and max(loaded) < 1.0, loaded  # was 17.7 s for the enum; figures in the note


def _schema(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}


def test_every_response_is_logged_500s_included(settings, caplog):
    app = create_app(settings)

    @app.get("/v1/test-boom")
    def boom():
        raise ZeroDivisionError("boom")

    with TestClient(app, raise_server_exceptions=False) as client, caplog.at_level(logging.INFO):
        response = client.get("/v1/test-boom", headers={"x-request-id": "boom-1"})
    assert response.status_code == 500 and response.json()["error"]["code"] == "internal_error"
    assert response.headers["x-request-id"] == "boom-1"
    logged = [r for r in caplog.records if r.getMessage() == "request" and r.request_id == "boom-1"]
    assert [r.status for r in logged] == [500]


def test_operator_only_metrics_and_a_framed_ui_is_refused(strict, session_factory):
    operator = _key(session_factory, "default")
    other_admin = _key(session_factory, f"g-{uuid.uuid4().hex[:6]}")
    with TestClient(create_app(strict)) as client:
        assert client.get("/metrics", headers=operator).status_code == 200
        refused = client.get("/metrics", headers=other_admin)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "not_operator"
        assert client.get("/v1/metrics/history", headers=operator).status_code == 200
        history = client.get("/v1/metrics/history", headers=other_admin)
        assert history.status_code == 403 and history.json()["error"]["code"] == "not_operator"
        for path in ("/ui/", "/ui/js/app.js"):
            ui = client.get(path)
            assert ui.status_code == 200
            assert "frame-ancestors 'none'" in ui.headers["content-security-policy"]
            assert "script-src 'self'" in ui.headers["content-security-policy"]
            assert ui.headers["x-frame-options"] == "DENY"
            assert ui.headers["x-content-type-options"] == "nosniff"
