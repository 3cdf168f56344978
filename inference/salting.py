"""Prefix-cache salts for engine calls made on a tenant's behalf.

NOTE: the engine shares cached prompt blocks only between requests of equal `cache_salt`. Every
call made for a tenant (follow-up rewrite, HyDE, multi-query, LLM reranker, chat) carries the
tenant's salt, or another tenant could tell from cached-token counts or timing what it asked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from inference.client import ChatBackend, ChatDelta
from inference.protocol import EngineClient, RequestOutput, SamplingParams


def _salted(params: SamplingParams, salt: str) -> SamplingParams:
    return params if params.cache_salt else dataclasses.replace(params, cache_salt=salt)


class SaltedEngine:
    """An engine client whose requests all carry `salt` (unless they set their own)."""

    def __init__(self, engine: EngineClient, salt: str) -> None:
        self._engine, self.salt = engine, salt

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def generate(
        self, request_id: str, prompt_token_ids: list[int], params: SamplingParams, *args, **kwargs
    ) -> AsyncIterator[RequestOutput]:
        return self._engine.generate(
            request_id, prompt_token_ids, _salted(params, self.salt), *args, **kwargs
        )


class SaltedChat:
    """A chat backend (in-process or remote) whose requests all carry `salt`."""

    def __init__(self, backend: ChatBackend, salt: str) -> None:
        self.backend, self.salt = backend, salt
        self.model_name = backend.model_name
        self.enforces_grammar = getattr(backend, "enforces_grammar", False)
        self.num_parameters = getattr(backend, "num_parameters", None)

    def count_tokens(self, text: str) -> int:
        return self.backend.count_tokens(text)

    def stream_chat(
        self, messages: list[dict], params: SamplingParams, request_id: str | None = None
    ) -> AsyncIterator[ChatDelta]:
        return self.backend.stream_chat(messages, _salted(params, self.salt), request_id)

    async def top_logprobs(
        self, messages: list[dict], n: int = 20, cache_salt: str | None = None
    ) -> dict[str, float]:
        return await self.backend.top_logprobs(messages, n, cache_salt or self.salt)

    async def tool_turn(
        self,
        messages: list[dict],
        tools: list[dict],
        tool_choice: str | dict,
        max_tokens: int,
        temperature: float,
        cache_salt: str | None = None,
    ) -> Any:
        return await self.backend.tool_turn(  # type: ignore[attr-defined]
            messages, tools, tool_choice, max_tokens, temperature, cache_salt or self.salt
        )
