"""The platform's one way to its LLM: every caller (the API's QA, chat and agents, retrieval's
transforms, evals, the CLI) asks an `LLMProvider` for a chat backend, which is, by settings:

- `engine.replicas` set: the replicas behind the prefix-aware router (inference/router.py);
- `engine.llm_base_url` set: that OpenAI-compatible server (vLLM, SGLang, `groundwork engine serve`);
- `engine.backend = "vllm"`: the vLLM server `groundwork up` supervises (inference/vllm_server.py);
- else our engine, in-process, loaded on first use.

Retrieval's query transforms and LLM reranker get `retrieval_backend()`: the server at
`retrieval.llm_base_url` when set, else the generator above (for answers, the cascade's first).

`qa.cascade` (agents/qa/README.md, "Cascade") is a policy over the provider's models: `cascade()`
hands out one `Rung` per listed model, `llm_model` being the backend above, any other model our
engine run in-process (one engine per model, started on first use and shut down with the rest) or
the OpenAI-compatible server at its `url`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from core.settings import Settings
from core.settings.qa import CascadeModel
from inference.client import ChatBackend, LocalChatBackend, RemoteChatBackend
from inference.foreground import Foreground
from inference.protocol import EngineClient

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rung:
    """One model of the answer cascade: the name answers report, its backend, its token ceiling."""

    name: str
    backend: ChatBackend
    max_tokens: int | None = None


def start_local_engine(
    settings: Settings, model: str | None = None, foreground: Foreground | None = None
) -> EngineClient:
    """Load and start the in-process engine on `model` (default: the configured generator; takes
    seconds), stepping aside for `foreground`'s holds if given."""
    from core.registry import resolve_model
    from inference.async_engine import AsyncLLMEngine  # torch + model: only when needed

    model = model or settings.llm_model
    resolved = resolve_model(model, settings.hf_offline, settings.model_cache_dir)
    engine = AsyncLLMEngine.from_settings(settings, resolved.path, model_name=model, foreground=foreground)
    engine.start()
    return engine


def remote_url(settings: Settings) -> str | None:
    """The one OpenAI-compatible server generating for the platform, if it is not in-process."""
    if settings.engine.llm_base_url:
        return settings.engine.llm_base_url
    if settings.engine.backend == "vllm":
        cfg = settings.engine.vllm
        return f"http://{cfg.host}:{cfg.port}/v1"
    return None


def in_process(settings: Settings) -> bool:
    return not settings.engine.replicas and remote_url(settings) is None


def local_token_counter(settings: Settings) -> Callable[[str], int] | None:
    """Exact prompt budgeting for a remote server of `llm_model` when its tokenizer is here."""
    from core.registry import ModelNotAvailable, resolve_model
    from inference.loaders import hf_directory
    from inference.loaders.hf_dir import load_tokenizer

    try:
        resolved = resolve_model(settings.llm_model, settings.hf_offline, settings.model_cache_dir)
        with hf_directory(resolved.path, settings.model_cache_dir) as directory:
            tokenizer = load_tokenizer(directory)
    except (ModelNotAvailable, OSError, ValueError) as exc:
        log.info(
            "no local tokenizer for %s (%s): prompt budgets estimate 4 chars/token", settings.llm_model, exc
        )
        return None
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False))


class LLMProvider:
    """Chooses once, builds lazily, and hands every caller the same backend."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._engine: EngineClient | None = None
        self._remote: ChatBackend | None = None
        # Cascade models other than llm_model, by name: an engine each, or a server's client.
        self._engines: dict[str, EngineClient] = {}
        self._servers: dict[str, ChatBackend] = {}
        self._retrieval: ChatBackend | None = None  # retrieval.llm_base_url's client, when set
        # What this process's engines step aside for: the API holds it while an answer retrieves.
        self.foreground = Foreground(settings.engine.foreground_share)

    @property
    def in_process(self) -> bool:
        return in_process(self.settings)

    @property
    def engine(self) -> EngineClient | None:
        """The in-process engine if it was started (for its stats), else None."""
        return self._engine

    def local_engine(self) -> EngineClient:
        """The in-process engine, loaded and started on first call (model load takes seconds)."""
        with self._lock:
            if self._engine is None:
                self._engine = start_local_engine(self.settings, foreground=self.foreground)
            return self._engine

    def _remote_backend(self) -> ChatBackend:
        with self._lock:
            if self._remote is None:
                self._remote = self._build_remote()
            return self._remote

    def _build_remote(self) -> ChatBackend:
        s = self.settings
        # Only a vLLM we start ourselves is known to apply grammars (its xgrammar structured outputs).
        known_vllm = s.engine.backend == "vllm" and not s.engine.llm_base_url
        counter = local_token_counter(s)

        def make(url: str) -> RemoteChatBackend:
            # Behind the router a failed replica is left at once for the next, not retried.
            retries = 0 if s.engine.replicas else 2
            return RemoteChatBackend(
                url, s.llm_model, count_tokens=counter, enforces_grammar=known_vllm, max_retries=retries
            )

        if s.engine.replicas:
            from inference.router import ReplicaRouter

            router = ReplicaRouter(s.engine.replicas, s.llm_model, s.engine.router, make)
            router.start()
            return router
        url = remote_url(s)
        assert url is not None
        return make(url)

    def backend(self, cache_salt: str | None = None) -> ChatBackend:
        """The generator; with `cache_salt` (the tenant), every call it makes is salted."""
        from inference.salting import SaltedChat, SaltedEngine

        if not self.in_process:
            backend = self._remote_backend()
            return SaltedChat(backend, cache_salt) if cache_salt else backend
        engine = self.local_engine()
        return LocalChatBackend(SaltedEngine(engine, cache_salt) if cache_salt else engine)

    def retrieval_backend(
        self, cache_salt: str | None = None, generator: ChatBackend | None = None
    ) -> ChatBackend:
        """What query transforms and the LLM reranker call, salted with `cache_salt`:
        `retrieval.llm_base_url`'s server if set, else `generator` (the caller's: an answer's first
        cascade model, an agent's model), else `backend()`."""
        from inference.salting import SaltedChat

        cfg = self.settings.retrieval
        if cfg.llm_base_url is not None:
            with self._lock:
                if self._retrieval is None:
                    model = cfg.llm_model or self.settings.llm_model
                    self._retrieval = RemoteChatBackend(cfg.llm_base_url, model, cfg.llm_api_key or "none")
                generator = self._retrieval
        elif generator is None:
            return self.backend(cache_salt)
        return SaltedChat(generator, cache_salt) if cache_salt else generator

    def cascade(self, cache_salt: str | None = None) -> list[Rung]:
        """The answer cascade (`qa.cascade`), smallest first; empty when none is configured."""
        return [
            Rung(m.model, self._cascade_backend(m, cache_salt), m.max_tokens)
            for m in self.settings.qa.cascade
        ]

    def answer_models(self, cache_salt: str | None = None) -> list[Rung]:
        """The models that answer in turn (`qa.cascade`), or the one generator as the only one."""
        rungs = self.cascade(cache_salt)
        if rungs:
            return rungs
        backend = self.backend(cache_salt)
        return [Rung(backend.model_name, backend)]

    def _cascade_backend(self, entry: CascadeModel, cache_salt: str | None) -> ChatBackend:
        from inference.salting import SaltedChat, SaltedEngine

        if entry.url is None and entry.model == self.settings.llm_model:
            return self.backend(cache_salt)
        with self._lock:
            if entry.url is not None:
                if entry.model not in self._servers:
                    self._servers[entry.model] = RemoteChatBackend(entry.url, entry.model)
                server = self._servers[entry.model]
                return SaltedChat(server, cache_salt) if cache_salt else server
            if entry.model not in self._engines:
                self._engines[entry.model] = start_local_engine(self.settings, entry.model, self.foreground)
            engine = self._engines[entry.model]
        return LocalChatBackend(SaltedEngine(engine, cache_salt) if cache_salt else engine)

    def shutdown(self) -> None:
        with self._lock:
            for engine in [self._engine, *self._engines.values()]:
                if engine is not None:
                    engine.shutdown()
            for backend in [self._remote, self._retrieval, *self._servers.values()]:
                close = getattr(backend, "close", None)
                if close is not None:
                    close()
            self._engine, self._remote, self._retrieval = None, None, None
            self._engines.clear()
            self._servers.clear()
