"""The generator the API uses: the in-process engine (built once, on first use) or a remote
OpenAI-compatible server when `GROUNDWORK_ENGINE__LLM_BASE_URL` is set."""

from __future__ import annotations

import threading

from api.state import AppState
from inference.client import ChatBackend, LocalChatBackend, RemoteChatBackend
from inference.protocol import EngineClient
from retrieval.backends import start_local_engine
from retrieval.salting import SaltedChat, SaltedEngine

_build_lock = threading.Lock()


def local_engine(state: AppState) -> EngineClient:
    """The in-process engine, loaded and started on first call (model load takes seconds)."""
    engine = state.extras.get("engine")
    if engine is not None:
        return engine
    with _build_lock:
        if "engine" not in state.extras:
            state.extras["engine"] = start_local_engine(state.settings)
    return state.extras["engine"]


def chat_backend(state: AppState, cache_salt: str | None = None) -> ChatBackend:
    """The generator; with `cache_salt` (the tenant), every call it makes is salted."""
    settings = state.settings
    if settings.engine.llm_base_url:
        backend = state.extras.get("remote_backend")
        if backend is None:
            backend = RemoteChatBackend(settings.engine.llm_base_url, settings.llm_model)
            state.extras["remote_backend"] = backend
        return SaltedChat(backend, cache_salt) if cache_salt else backend
    engine = local_engine(state)
    return LocalChatBackend(SaltedEngine(engine, cache_salt) if cache_salt else engine)
