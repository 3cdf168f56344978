"""The generator the API uses: the app's one `LLMProvider` (inference/provider.py), which picks the
in-process engine, a remote server, the supervised vLLM or the replica router from settings."""

from __future__ import annotations

import threading

from api.state import AppState
from inference.client import ChatBackend
from inference.protocol import EngineClient
from inference.provider import LLMProvider, Rung

_build_lock = threading.Lock()


def provider(state: AppState) -> LLMProvider:
    llm = state.extras.get("llm")
    if llm is None:
        with _build_lock:
            llm = state.extras.setdefault("llm", LLMProvider(state.settings))
    return llm


def local_engine(state: AppState) -> EngineClient:
    """The in-process engine, loaded and started on first call (model load takes seconds)."""
    engine = provider(state).local_engine()
    state.extras["engine"] = engine  # the metrics sampler reads its stats
    return engine


def chat_backend(state: AppState, cache_salt: str | None = None) -> ChatBackend:
    """The generator; with `cache_salt` (the tenant), every call it makes is salted."""
    llm = provider(state)
    if llm.in_process:
        local_engine(state)
    return llm.backend(cache_salt)


def answer_models(state: AppState, cache_salt: str | None = None) -> list[Rung]:
    """The models that answer in turn (`qa.cascade`), or the one generator as the only one."""
    llm = provider(state)
    rungs = llm.cascade(cache_salt)
    if rungs and llm.in_process and any(r.name == state.settings.llm_model for r in rungs):
        local_engine(state)  # started by cascade(): recorded for the metrics sampler
    if rungs:
        return rungs
    backend = chat_backend(state, cache_salt)
    return [Rung(backend.model_name, backend)]
