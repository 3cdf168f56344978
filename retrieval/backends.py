"""Which LLM the query transforms and the LLM reranker talk to."""

from __future__ import annotations

from core.settings import Settings
from core.settings.retrieval import RetrievalConfig
from inference.client import ChatBackend, LocalChatBackend, RemoteChatBackend
from inference.protocol import EngineClient
from inference.provider import remote_url
from inference.salting import SaltedChat, SaltedEngine
from retrieval.llm import EngineJudge, RelevanceJudge, RemoteJudge


def llm_url(settings: Settings) -> str | None:
    """The OpenAI-compatible server to use: retrieval's own, else the platform's (engine section,
    the supervised vLLM; with replicas, the first: these short calls are not routed)."""
    replicas = settings.engine.replicas
    return settings.retrieval.llm_base_url or remote_url(settings) or (replicas[0] if replicas else None)


def needs_llm(config: RetrievalConfig) -> bool:
    return config.transform.kind != "none" or (config.rerank.enabled and config.rerank.kind == "llm")


def needs_local_engine(settings: Settings, config: RetrievalConfig) -> bool:
    return needs_llm(config) and not llm_url(settings)


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
