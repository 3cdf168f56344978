"""Which LLM the query transforms and the LLM reranker talk to."""

from __future__ import annotations

from core.settings import Settings
from core.settings.retrieval import RetrievalConfig
from inference.client import ChatBackend, LocalChatBackend, RemoteChatBackend
from inference.protocol import EngineClient
from retrieval.llm import EngineJudge, RelevanceJudge, RemoteJudge
from retrieval.salting import SaltedChat, SaltedEngine


def llm_url(settings: Settings) -> str | None:
    """The OpenAI-compatible server to use: retrieval's own, else the engine section's."""
    return settings.retrieval.llm_base_url or settings.engine.llm_base_url


def needs_llm(config: RetrievalConfig) -> bool:
    return config.transform.kind != "none" or (config.rerank.enabled and config.rerank.kind == "llm")


def needs_local_engine(settings: Settings, config: RetrievalConfig) -> bool:
    return needs_llm(config) and not llm_url(settings)


def start_local_engine(settings: Settings) -> EngineClient:
    """Load and start the in-process engine on the configured generator (takes seconds)."""
    from core.registry import resolve_model
    from inference.async_engine import AsyncLLMEngine  # torch + model: only when needed

    resolved = resolve_model(settings.llm_model, settings.hf_offline, settings.model_cache_dir)
    engine = AsyncLLMEngine.from_settings(settings, resolved.path, model_name=settings.llm_model)
    engine.start()
    return engine


def llm_backends(
    settings: Settings, engine: EngineClient | None = None, cache_salt: str | None = None
) -> tuple[ChatBackend | None, RelevanceJudge | None]:
    """The configured URL if any, else the caller's in-process engine, else none (the stages that
    need an LLM are then skipped, and say so in debug output). A tenant's calls pass its
    `cache_salt` (see retrieval/salting.py)."""
    url = llm_url(settings)
    if url:
        model = settings.retrieval.llm_model or settings.llm_model
        key = settings.retrieval.llm_api_key or "none"
        chat: ChatBackend = RemoteChatBackend(url, model, key)
        return (SaltedChat(chat, cache_salt) if cache_salt else chat), RemoteJudge(
            url, model, key, cache_salt
        )
    if engine is not None:
        engine = SaltedEngine(engine, cache_salt) if cache_salt else engine
        return LocalChatBackend(engine), EngineJudge(engine)
    return None, None
