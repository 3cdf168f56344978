"""Every engine call made for a tenant carries its prefix-cache salt (issue 12: tenant B saw 64 of 70
prompt tokens of tenant A's prompt come back cached)."""

from __future__ import annotations

import asyncio

import pytest

from agents.qa.pipeline import AskPipeline, AskRequest
from core.settings import Settings
from core.settings.retrieval import TransformConfig
from inference.client import LocalChatBackend
from inference.protocol import RequestOutput, SamplingParams
from inference.provider import LLMProvider
from retrieval.transform import HyDE, MultiQuery

pytestmark = pytest.mark.unit


class RecordingEngine:
    """Answers "yes" to everything and records the parameters of each request."""

    model_name, max_model_len = "rec", 2048

    def __init__(self) -> None:
        self.salts: list[str | None] = []

    def apply_chat_template(self, messages, add_generation_prompt=True, **_):
        return [1, 2, 3]

    def encode(self, text: str) -> list[int]:
        return [1] * len(text.split())

    def decode(self, ids: list[int]) -> str:
        return "yes"

    async def generate(self, request_id: str, prompt, params: SamplingParams):
        self.salts.append(params.cache_salt)
        yield RequestOutput(request_id, [5], "yes", finished=True, finish_reason="stop", num_prompt_tokens=3)


def test_rewrite_hyde_multi_query_and_llm_judge_are_salted():
    engine = RecordingEngine()
    chat = LLMProvider(Settings()).retrieval_backend("tenant-a", generator=LocalChatBackend(engine))

    async def run_all():
        await HyDE(TransformConfig(kind="hyde"), chat).run("q")
        await MultiQuery(TransformConfig(kind="multi_query"), chat).run("q")
        await chat.top_logprobs([{"role": "user", "content": "relevant?"}])  # the LLM reranker's call
        pipeline = AskPipeline(None, chat, Settings().qa)
        await pipeline.standalone_query(AskRequest("and then?", history=[{"role": "user", "content": "x"}]))

    asyncio.run(run_all())
    assert engine.salts == ["tenant-a"] * 4
