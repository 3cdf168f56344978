"""Several OpenAI-compatible replicas (our engine servers, vLLM, or both) behind one chat backend.

A request goes to the replica where it should start soonest, counting what is likely cached there.
The router remembers, per replica, the chained hashes of the fixed-size character blocks of the
prompts it sent there (salted per tenant, LRU-bounded: `PrefixMemory`), and scores each replica by
the leading blocks of the new prompt it holds, less `load_blocks` for every request it is busy with
(in flight from here plus the queue its /metrics reports): a held prefix saves prefill, a busy
replica makes the request wait. The highest score wins; ties (nothing held anywhere, the same load)
go by rendezvous hashing of the prompt's leading characters, so that several API processes agree.
A replica that refuses connections, or fails two health checks in a row, leaves the
rotation until its /health answers again. A request whose replica fails before any token arrived
is sent to the next one; one that had started streaming fails (its tokens were already sent).
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import openai

from core.settings.serving import RouterSettings
from inference.client import ChatDelta, RemoteChatBackend
from inference.prefix_memory import PrefixMemory, prompt_blocks
from inference.protocol import EngineOverloadedError, SamplingParams

log = logging.getLogger(__name__)

# Gauges both servers export: ours as groundwork:*, vLLM as vllm:* (same meaning).
WAITING = ("groundwork:num_requests_waiting", "vllm:num_requests_waiting")
KV_USAGE = ("groundwork:kv_cache_usage_perc", "vllm:kv_cache_usage_perc")
# Failures where the request never reached a model: safe to send elsewhere.
RETRYABLE = (openai.APIConnectionError, openai.InternalServerError, httpx.TransportError)


@dataclass(eq=False)
class Replica:
    backend: RemoteChatBackend
    memory: PrefixMemory
    healthy: bool = True
    in_flight: int = 0
    waiting: float = 0.0
    kv_usage: float = 0.0
    requests: int = 0
    retried_away: int = 0
    failed_checks: int = 0

    @property
    def url(self) -> str:
        return self.backend.base_url

    @property
    def root(self) -> str:
        return self.url.removesuffix("/").removesuffix("/v1")

    @property
    def load(self) -> float:
        return self.in_flight + self.waiting


def prefix_key(messages: list[dict], salt: str | None, chars: int) -> bytes:
    """What breaks a tie between replicas that hold equally much of a prompt: its salt and the first
    `chars` of its first message (the system prompt: instructions, then the first sources in a RAG
    prompt; never the question), the same in every API process."""
    first = messages[0] if messages else {}
    text = f"{first.get('role')}\x00{first.get('content') or ''}"[:chars]
    return hashlib.sha256(f"{salt or ''}\x02{text}".encode()).digest()


def _rendezvous(key: bytes, url: str) -> bytes:
    """`url`'s rendezvous-hashing rank for `key`, lowest first: every process ranks replicas alike."""
    return hashlib.sha256(key + url.encode()).digest()


def parse_load(metrics_text: str) -> tuple[float, float]:
    """(waiting requests, KV-cache use) from a Prometheus text page of our server or vLLM."""
    waiting = kv = 0.0
    for line in metrics_text.splitlines():
        if not line or line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in WAITING:
            waiting += float(line.rsplit(" ", 1)[1])
        elif name in KV_USAGE:
            kv = max(kv, float(line.rsplit(" ", 1)[1]))
    return waiting, kv


class ReplicaRouter:
    """A `ChatBackend` (and agent `tool_turn` target) over `urls`."""

    num_parameters: int | None = None

    def __init__(
        self,
        urls: list[str],
        model_name: str,
        config: RouterSettings,
        make_backend: Callable[[str], RemoteChatBackend],
    ) -> None:
        if not urls:
            raise ValueError("the router needs at least one replica URL")
        self.model_name, self.config = model_name, config
        self.replicas = [Replica(make_backend(url), PrefixMemory(config.memory_blocks)) for url in urls]
        self.enforces_grammar = all(r.backend.enforces_grammar for r in self.replicas)
        self._turn = itertools.count()
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None

    # -- health --------------------------------------------------------------------------------------

    def start(self) -> None:
        """Poll every replica's /health and /metrics from a daemon thread until `close`."""
        if self._poller is None:
            self._poller = threading.Thread(target=self._poll_loop, name="replica-router", daemon=True)
            self._poller.start()

    def close(self) -> None:
        self._stop.set()

    def _poll_loop(self) -> None:
        # NOTE: a generous timeout: a busy replica answers /health slowly, and losing it then would
        # send its prefixes elsewhere exactly when load is highest.
        with httpx.Client(timeout=max(5.0, self.config.health_interval_s)) as http:
            while True:
                for replica in self.replicas:
                    self.check(replica, http)
                if self._stop.wait(self.config.health_interval_s):
                    return

    def check(self, replica: Replica, http: httpx.Client) -> None:
        try:
            ok = http.get(f"{replica.root}/health").status_code == 200
            if ok:
                replica.waiting, replica.kv_usage = parse_load(http.get(f"{replica.root}/metrics").text)
        except httpx.HTTPError:
            ok = False
        replica.failed_checks = 0 if ok else replica.failed_checks + 1
        # Two failed polls in a row take a replica out; a refused request already did (`_failed`).
        healthy = ok or (replica.healthy and replica.failed_checks < 2)
        if not healthy:
            replica.memory.clear()
        if healthy != replica.healthy:
            log.warning("replica %s %s", replica.url, "is back" if healthy else "failed its health checks")
        replica.healthy = healthy

    # -- choice --------------------------------------------------------------------------------------

    def order(self, messages: list[dict], salt: str | None) -> list[Replica]:
        """Replicas to try, best first: healthy ones (all, if none is), then the others."""
        healthy = [r for r in self.replicas if r.healthy] or list(self.replicas)
        if self.config.policy == "round_robin":
            turn = next(self._turn) % len(healthy)
            ranked = healthy[turn:] + healthy[:turn]
        else:
            blocks = prompt_blocks(messages, salt, self.config.block_chars)
            key = prefix_key(messages, salt, self.config.prefix_chars)
            scores = {r: r.memory.matched(blocks) - self.config.load_blocks * r.load for r in healthy}
            ranked = sorted(healthy, key=lambda r: (-scores[r], r.kv_usage, _rendezvous(key, r.url)))
        return ranked + [r for r in self.replicas if r not in ranked]

    def remember(self, replica: Replica, messages: list[dict], salt: str | None) -> None:
        """`replica` was sent this prompt: its blocks count as cached there from now on."""
        if self.config.policy == "prefix":
            replica.memory.add(prompt_blocks(messages, salt, self.config.block_chars))

    def _failed(self, replica: Replica, exc: Exception) -> None:
        replica.retried_away += 1
        if not isinstance(exc, openai.InternalServerError):  # a 5xx answer: alive, only busy or broken
            replica.healthy = False
            replica.memory.clear()
        log.warning("replica %s failed before streaming (%s); trying the next", replica.url, exc)

    # -- ChatBackend -------------------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        return self.replicas[0].backend.count_tokens(text)

    async def stream_chat(
        self, messages: list[dict], params: SamplingParams, request_id: str | None = None
    ) -> AsyncIterator[ChatDelta]:
        last: Exception | None = None
        for replica in self.order(messages, params.cache_salt):
            started = False
            replica.in_flight += 1
            replica.requests += 1
            self.remember(replica, messages, params.cache_salt)
            try:
                async for delta in replica.backend.stream_chat(messages, params, request_id):
                    started = True
                    yield delta
                return
            except RETRYABLE as exc:
                if started:
                    raise
                self._failed(replica, exc)
                last = exc
            finally:
                replica.in_flight -= 1
        raise EngineOverloadedError(f"no replica could serve the request: {last}", retry_after_s=2.0)

    async def _first_to_answer(self, messages: list[dict], salt: str | None, call: Callable) -> Any:
        """`call(backend)` on the replicas in routing order, until one answers (non-streamed calls)."""
        last: Exception | None = None
        for replica in self.order(messages, salt):
            replica.in_flight += 1
            replica.requests += 1
            self.remember(replica, messages, salt)
            try:
                return await call(replica.backend)
            except RETRYABLE as exc:
                self._failed(replica, exc)
                last = exc
            finally:
                replica.in_flight -= 1
        raise EngineOverloadedError(f"no replica could serve the request: {last}", retry_after_s=2.0)

    async def top_logprobs(
        self, messages: list[dict], n: int = 20, cache_salt: str | None = None
    ) -> dict[str, float]:
        return await self._first_to_answer(
            messages, cache_salt, lambda backend: backend.top_logprobs(messages, n, cache_salt)
        )

    async def tool_turn(
        self,
        messages: list[dict],
        tools: list[dict],
        tool_choice: str | dict,
        max_tokens: int,
        temperature: float,
        cache_salt: str | None = None,
        parallel: bool = False,
    ) -> Any:
        return await self._first_to_answer(
            messages,
            cache_salt,
            lambda backend: backend.tool_turn(
                messages, tools, tool_choice, max_tokens, temperature, cache_salt, parallel
            ),
        )

    def stats(self) -> list[dict]:
        return [
            {
                "url": r.url,
                "healthy": r.healthy,
                "in_flight": r.in_flight,
                "requests": r.requests,
                "retried_away": r.retried_away,
            }
            for r in self.replicas
        ]
