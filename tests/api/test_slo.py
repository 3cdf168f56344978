"""Goodput accounting: a request is good only if it meets all of its route's SLOs; failures count
against it, client errors are not judged; /metrics exposes the counters and the windowed share."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from prometheus_client import CollectorRegistry, Counter, generate_latest

from api.slo import SloTracker, observed
from core.errors import ClientError
from core.settings.observability import RouteSlo, SloSettings

TENANT = uuid.uuid4()


@pytest.fixture
def tracker():
    registry = CollectorRegistry()
    settings = SloSettings(window_s=60, routes={"chat": RouteSlo(ttft_s=1.0, tpot_s=0.1, e2e_s=5.0)})
    tokens = Counter("groundwork:tenant_tokens", "t", ["tenant", "kind"], registry=registry)
    return SloTracker(settings, registry), tokens, registry


def test_every_slo_must_hold(tracker):
    slo, _, registry = tracker
    assert slo.record("chat", 0.5, 0.05, 2.0)
    assert not slo.record("chat", 1.5, 0.05, 2.0)  # slow first token
    assert not slo.record("chat", 0.5, 0.5, 2.0)  # slow decoding
    assert not slo.record("chat", 0.5, 0.05, 9.0)  # slow overall
    assert not slo.record("chat", 0.5, 0.05, 2.0, failed=True)
    assert slo.goodput("chat") == pytest.approx(0.2)
    text = generate_latest(registry).decode()
    assert 'groundwork:goodput{route="chat"} 0.2' in text
    assert 'groundwork:slo_requests_total{route="chat"} 5.0' in text
    assert 'groundwork:slo_good_requests_total{route="chat"} 1.0' in text
    for cause in ("ttft", "tpot", "e2e", "error"):
        assert f'groundwork:slo_missed_total{{route="chat",slo="{cause}"}} 1.0' in text


def test_no_requests_no_goodput_sample(tracker):
    slo, _, registry = tracker
    assert slo.goodput() is None
    assert "groundwork:goodput{" not in generate_latest(registry).decode()


async def _drain(events):
    return [e async for e in events]


async def _answer():
    yield {"type": "token", "text": "a"}
    yield {"type": "token", "text": "b"}
    yield {"type": "done", "usage": {"prompt_tokens": 7, "completion_tokens": 2}}


async def _refused(status: int):
    raise ClientError(status, "x", "refused")
    yield  # an async generator


def test_observed_times_the_stream_and_counts_tenant_tokens(tracker):
    slo, tokens, registry = tracker
    asyncio.run(_drain(observed(_answer(), slo, "chat", tokens, TENANT)))
    assert slo.goodput("chat") == 1.0
    assert tokens.labels(str(TENANT), "prompt")._value.get() == 7
    for status in (404, 503):
        with pytest.raises(ClientError):
            asyncio.run(_drain(observed(_refused(status), slo, "chat", tokens, TENANT)))
    # The 404 is the client's mistake; the 503 is the platform failing the request.
    assert slo.goodput("chat") == pytest.approx(0.5)
