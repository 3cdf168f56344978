"""`EngineClient` over `LLMEngine`: the step loop runs in one background thread, requests stream back
to asyncio callers as `RequestOutput` deltas.

The engine thread owns the `LLMEngine`; callers only talk to it through a command queue (add, abort,
stop), and outputs come back through each request's asyncio queue via `call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

from inference.chat_template import render_chat
from inference.config import EngineConfig, EngineOptions
from inference.engine import LLMEngine, StepError
from inference.foreground import Foreground, release_current
from inference.grammar.spec import StructuredOutputSpec
from inference.protocol import (
    EngineError,
    EngineOverloadedError,
    EngineStats,
    InvalidRequestError,
    RequestOutput,
    SamplingParams,
)

log = logging.getLogger(__name__)

_Stream = tuple[asyncio.AbstractEventLoop, asyncio.Queue]


class PlatformSettings(Protocol):
    """The part of the platform's Settings the engine reads (the engine does not import core/)."""

    @property
    def engine(self) -> EngineOptions: ...

    @property
    def model_cache_dir(self) -> Path | None: ...


class AsyncLLMEngine:
    def __init__(
        self, config: EngineConfig, model_name: str | None = None, foreground: Foreground | None = None
    ) -> None:
        self.thread_nice = config.thread_nice
        self._commands: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._streams: dict[str, _Stream] = {}
        self._pending_adds = 0
        self._lock = threading.Lock()  # guards _streams and _pending_adds between caller and engine threads
        self._thread: threading.Thread | None = None
        # Interactive requests this engine steps aside for (inference/foreground.py): on CPU only,
        # where they share the cores with it.
        self.foreground = foreground if config.device.type == "cpu" else None
        self._load(config)  # sets self.engine
        if self.foreground is not None:
            self.engine.model.between_layers = self.foreground.wait
        self.tokenizer = self.engine.tokenizer
        self.model_name = model_name or config.model_path.stem
        self.max_model_len = self.engine.max_model_len
        # The model's size, for callers that adapt to it (quote answers from small generators).
        self.num_parameters = sum(p.numel() for p in self.engine.model.parameters())
        self._max_waiting = config.max_waiting

    def _load(self, config: EngineConfig) -> None:
        """`self.engine`, built on the thread that will step it (started here); raises its loading error.

        NOTE: GNU OpenMP keeps one worker team per thread that starts parallel work, and once a
        process holds more of its threads than there are CPUs, every team's workers stop spinning
        between parallel regions and sleep at once (libgomp's throttled spin): each matmul then pays
        a futex wake-up. Loading on the caller's thread left a second team behind it, and a 32-row
        decode step on the engine thread took 56 ms instead of 40 (SmolLM2, 2 cores): the engine's
        thread does all of its torch work, so a process that only serves (`groundwork engine serve`,
        the benchmarks) has that one team."""
        failed: list[BaseException] = []
        ready = threading.Event()

        def run() -> None:
            self._renice()
            try:
                self.engine = LLMEngine(config)
            except BaseException as e:  # re-raised on the caller's thread
                failed.append(e)
                return
            finally:
                ready.set()
            self._loop()

        self._thread = threading.Thread(target=run, name="groundwork-engine", daemon=True)
        self._thread.start()
        ready.wait()
        if failed:
            self._thread.join()
            self._thread = None
            raise failed[0]

    @classmethod
    def from_settings(
        cls,
        settings: PlatformSettings,
        model_path: str | Path,
        model_name: str | None = None,
        foreground: Foreground | None = None,
        **overrides: Any,
    ) -> AsyncLLMEngine:
        config = EngineConfig.from_settings(
            settings.engine, model_path, settings.model_cache_dir, **overrides
        )
        return cls(config, model_name, foreground)

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> None:
        """Run the step loop (it runs from construction on; again after `shutdown`)."""
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._restarted, name="groundwork-engine", daemon=True)
            self._thread.start()

    def shutdown(self) -> None:
        if self._thread is not None:
            self._commands.put(("stop",))
            self._thread.join()
            self._thread = None
        with self._lock:
            streams, self._streams = self._streams, {}
        for loop, q in streams.values():
            _call_soon(loop, q.put_nowait, EngineError("the engine has shut down"))

    # -- tokenizer -----------------------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, token_ids: list[int]) -> str:
        return self.tokenizer.decode(token_ids, skip_special_tokens=True)

    def apply_chat_template(
        self, messages: list[dict], add_generation_prompt: bool = True, tools: list[dict] | None = None
    ) -> list[int]:
        if not getattr(self.tokenizer, "chat_template", None):
            raise InvalidRequestError(f"model {self.model_name!r} has no chat template")
        # NOTE: render then encode without special tokens: the template already writes BOS if the model
        # wants one, and encode() would add a second.
        text = render_chat(self.tokenizer, messages, tools, add_generation_prompt)
        return self.tokenizer.encode(text, add_special_tokens=False)

    async def precompile(self, spec: StructuredOutputSpec) -> None:
        """Compile `spec` in a worker thread; `generate`'s own check, which runs in the caller's thread
        (an event loop, for every front-end), then finds it in the grammar cache.

        NOTE: xgrammar's compile of a new tool set or schema (and the tokenizer tables it builds on
        first use) would otherwise hold that loop, and so every other request on it, meanwhile."""
        if not self.engine.compiled(spec):  # a cached grammar costs no thread hop
            await asyncio.to_thread(lambda: self.engine.grammars().service.compile(spec))

    # -- requests ------------------------------------------------------------------------------------

    def generate(
        self, request_id: str, prompt_token_ids: list[int], params: SamplingParams
    ) -> AsyncIterator[RequestOutput]:
        """Queue a request and return its stream. Raises InvalidRequestError / EngineOverloadedError
        right away (not on first iteration), so front-ends can answer 400 / 503 before streaming."""
        self.engine.validate(request_id, prompt_token_ids, params)
        release_current()  # the caller now waits on us: we no longer step aside for it
        loop = asyncio.get_running_loop()
        with self._lock:
            if request_id in self._streams:
                raise InvalidRequestError(f"request id {request_id!r} is already in use")
            if len(self.engine.scheduler.waiting) + self._pending_adds >= self._max_waiting:
                raise EngineOverloadedError(f"{self._max_waiting} requests are already waiting")
            stream: asyncio.Queue = asyncio.Queue()
            self._streams[request_id] = (loop, stream)
            self._pending_adds += 1
        self.start()
        self._commands.put(("add", request_id, list(prompt_token_ids), params))
        return self._consume(request_id, stream)

    async def _consume(self, request_id: str, stream: asyncio.Queue) -> AsyncIterator[RequestOutput]:
        finished = False
        try:
            while not finished:
                item = await stream.get()
                if isinstance(item, BaseException):
                    finished = True
                    raise item
                finished = item.finished
                yield item
        finally:
            if not finished:  # the caller went away (client disconnect, break): free the slot
                self._commands.put(("abort", request_id))

    async def abort(self, request_id: str) -> None:
        self._commands.put(("abort", request_id))

    def stats(self) -> EngineStats:
        """A snapshot (read without locking the engine thread: counts may be one step stale)."""
        stats = self.engine.stats()
        stats.num_waiting += self._pending_adds
        return stats

    # -- engine thread -------------------------------------------------------------------------------

    def _renice(self) -> None:
        if self.thread_nice and sys.platform == "linux":
            # NOTE: on Linux nice() is per thread, and the OpenMP team this thread starts at its first
            # parallel op inherits it: the engine's matmul threads yield too, the API's own stay.
            os.nice(self.thread_nice)

    def _restarted(self) -> None:
        self._renice()
        self._loop()

    def _loop(self) -> None:
        while True:
            if not self._drain_commands(block=not self.engine.has_unfinished()):
                self._deliver(self.engine.abort_all())  # streams end with finish_reason "abort"
                return
            if self.foreground is not None:
                self.foreground.wait()
            try:
                outputs = self.engine.step()
            except StepError as e:
                log.exception("engine step failed; failing its requests %s", e.request_ids)
                self._deliver(e.outputs)
                for rid in e.request_ids:
                    self._deliver_error(rid, EngineError(f"internal engine error: {e.__cause__!r}"))
                continue
            except Exception as e:  # a bug outside a batch (e.g. scheduling): fail everything in flight
                log.exception("engine loop failed; aborting all requests")
                for out in self.engine.abort_all():
                    self._deliver_error(out.request_id, EngineError(f"internal engine error: {e!r}"))
                continue
            self._deliver(outputs)

    def _drain_commands(self, block: bool) -> bool:
        """Apply queued commands (waiting for one if `block`); False once asked to stop."""
        while True:
            try:
                command = self._commands.get(block=block)
            except queue.Empty:
                return True
            block = False
            kind = command[0]
            if kind == "stop":
                return False
            if kind == "add":
                _, rid, prompt, params = command
                try:
                    self.engine.add_request(rid, prompt, params)
                except EngineError as e:
                    self._deliver_error(rid, e)
                except Exception as e:  # a bug in adding this request: it alone fails, the engine goes on
                    log.exception("adding request %s failed", rid)
                    self._deliver_error(rid, EngineError(f"internal engine error: {e!r}"))
                with self._lock:  # NOTE: after the add, so a request is never counted nowhere
                    self._pending_adds -= 1
            elif kind == "abort":
                output = self.engine.abort_request(command[1])
                if output is not None:
                    self._deliver([output])

    def _deliver(self, outputs: list[RequestOutput]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Queue, RequestOutput]]] = {}
        with self._lock:
            for out in outputs:
                stream = (
                    self._streams.pop(out.request_id) if out.finished else self._streams.get(out.request_id)
                )
                if stream is not None:
                    by_loop.setdefault(stream[0], []).append((stream[1], out))
        # One wake-up per event loop per step, not one per output.
        for loop, items in by_loop.items():
            _call_soon(loop, _put_all, items)

    def _deliver_error(self, request_id: str, error: Exception) -> None:
        with self._lock:
            stream = self._streams.pop(request_id, None)
        if stream is not None:
            _call_soon(stream[0], stream[1].put_nowait, error)


def _put_all(items: list[tuple[asyncio.Queue, RequestOutput]]) -> None:
    for q, out in items:
        q.put_nowait(out)


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Any, *args: Any) -> None:
    with contextlib.suppress(RuntimeError):  # the caller's loop is closed: nobody is listening any more
        loop.call_soon_threadsafe(fn, *args)
