"""Next-token yes/no logprobs from an LLM, for the pointwise LLM reranker.

Generation (HyDE, multi-query) goes through inference.client's chat backends; those stream text
only, so the one-token relevance judgement has its own two small backends here.
"""

from __future__ import annotations

import math
import uuid
from typing import Protocol

from inference.protocol import EngineClient, SamplingParams

# NOTE: the engine and OpenAI servers return at most 20 top logprobs; a verdict missing from
# them gets this logprob, below anything the model found plausible.
_ABSENT = -30.0


def verdict_logprobs(top: dict[str, float]) -> tuple[float, float]:
    """(log P(yes), log P(no)) from top next-token logprobs keyed by token text; spellings such as
    "Yes", " yes" and "YES" are one verdict (their probabilities add up)."""
    mass = {"yes": 0.0, "no": 0.0}
    for token, logprob in top.items():
        word = token.strip().lower()
        if word in mass:
            mass[word] += math.exp(logprob)
    return tuple(math.log(m) if m > 0 else _ABSENT for m in (mass["yes"], mass["no"]))  # type: ignore[return-value]


class RelevanceJudge(Protocol):
    async def verdict(self, messages: list[dict]) -> tuple[float, float]:
        """(log P(yes), log P(no)) of the assistant's first token after `messages`."""
        ...


class EngineJudge:
    """Our in-process engine: one greedy token with the top-20 logprobs."""

    def __init__(self, engine: EngineClient) -> None:
        self.engine = engine

    async def verdict(self, messages: list[dict]) -> tuple[float, float]:
        prompt = self.engine.apply_chat_template(messages, add_generation_prompt=True)
        params = SamplingParams(max_tokens=1, temperature=0.0, logprobs=20)
        top: dict[int, float] = {}
        async for out in self.engine.generate(uuid.uuid4().hex, prompt, params):
            for entry in out.logprobs or []:
                top = entry.top or {entry.token_id: entry.logprob}
        return verdict_logprobs({self.engine.decode([tid]): lp for tid, lp in top.items()})


class RemoteJudge:
    """Any OpenAI-compatible server that returns `top_logprobs` (vLLM, SGLang, `groundwork engine serve`)."""

    def __init__(
        self, base_url: str, model_name: str, api_key: str = "none", cache_salt: str | None = None
    ) -> None:
        from openai import AsyncOpenAI

        self.client = AsyncOpenAI(base_url=base_url, api_key=api_key)
        self.model_name = model_name
        self.cache_salt = cache_salt  # vLLM and our server isolate prefix caches by it

    async def verdict(self, messages: list[dict]) -> tuple[float, float]:
        response = await self.client.chat.completions.create(
            model=self.model_name,
            messages=messages,
            max_tokens=1,
            temperature=0.0,
            logprobs=True,
            top_logprobs=20,
            extra_body={"cache_salt": self.cache_salt} if self.cache_salt else None,
        )
        content = response.choices[0].logprobs.content if response.choices[0].logprobs else None
        top = {t.token: t.logprob for t in content[0].top_logprobs} if content else {}
        return verdict_logprobs(top)
