"""Chat backends: what RAG and agents use to generate, in-process or over HTTP.

`LocalChatBackend` drives our engine through `protocol.EngineClient`; `RemoteChatBackend` talks to
any OpenAI-compatible server (`groundwork engine serve`, vLLM, SGLang). Both stream `ChatDelta`s and
end with one that carries usage, so callers never care which one they hold.
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from inference.protocol import EngineClient, SamplingParams
from inference.tracing import GenerationSpan

if TYPE_CHECKING:
    from inference.grammar.spec import StructuredOutputSpec


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    def counts(self) -> tuple[int, int, int]:
        return self.prompt_tokens, self.completion_tokens, self.cached_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(a + b for a, b in zip(self.counts(), other.counts(), strict=True)))

    def as_dict(self) -> dict:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
        }


@dataclass
class ChatDelta:
    text: str = ""
    finished: bool = False
    finish_reason: str | None = None
    usage: Usage | None = None  # set on the final delta
    extra: dict = field(default_factory=dict)


class ChatBackend(Protocol):
    model_name: str

    def count_tokens(self, text: str) -> int: ...

    def stream_chat(
        self, messages: list[dict], params: SamplingParams, request_id: str | None = None
    ) -> AsyncIterator[ChatDelta]: ...

    async def top_logprobs(
        self, messages: list[dict], n: int = 20, cache_salt: str | None = None
    ) -> dict[str, float]:
        """Log-probabilities of the likeliest first tokens of the reply to `messages`, keyed by
        token text (at most `n`: the engine and OpenAI servers return at most 20)."""
        ...


async def complete_chat(
    backend: ChatBackend, messages: list[dict], params: SamplingParams
) -> tuple[str, ChatDelta]:
    """Run a chat to the end; returns the whole text and the final delta (finish reason, usage)."""
    parts: list[str] = []
    final = ChatDelta(finished=True)
    async for delta in backend.stream_chat(messages, params):
        parts.append(delta.text)
        if delta.finished:
            final = delta
    return "".join(parts), final


class LocalChatBackend:
    """Our in-process engine."""

    enforces_grammar = True  # SamplingParams.structured_output always constrains decoding

    def __init__(self, engine: EngineClient) -> None:
        self.engine = engine
        self.model_name = engine.model_name
        # Callers size their approach to the model (quote mode for small ones); None: unknown.
        self.num_parameters: int | None = getattr(engine, "num_parameters", None)

    def count_tokens(self, text: str) -> int:
        return len(self.engine.encode(text))

    async def stream_chat(
        self, messages: list[dict], params: SamplingParams, request_id: str | None = None
    ) -> AsyncIterator[ChatDelta]:
        prompt = self.engine.apply_chat_template(messages, add_generation_prompt=True)
        if params.structured_output is not None:
            await self.engine.precompile(params.structured_output)
        request_id = request_id or uuid.uuid4().hex
        span = GenerationSpan(self.model_name, params, request_id, "groundwork")
        try:
            async for out in self.engine.generate(request_id, prompt, params):
                usage = None
                if out.new_token_ids:
                    span.token()
                if out.finished:
                    usage = Usage(out.num_prompt_tokens, out.num_output_tokens, out.num_cached_tokens)
                    span.finish(out.finish_reason, *usage.counts(), out.scheduled_at)
                yield ChatDelta(out.new_text, out.finished, out.finish_reason, usage)
        except BaseException as exc:  # the caller's cancellation included: the span says why it ended
            span.fail(exc)
            raise

    async def top_logprobs(
        self, messages: list[dict], n: int = 20, cache_salt: str | None = None
    ) -> dict[str, float]:
        prompt = self.engine.apply_chat_template(messages, add_generation_prompt=True)
        params = SamplingParams(max_tokens=1, temperature=0.0, logprobs=n, cache_salt=cache_salt)
        top: dict[int, float] = {}
        async for out in self.engine.generate(uuid.uuid4().hex, prompt, params):
            for entry in out.logprobs or []:
                top = entry.top or {entry.token_id: entry.logprob}
        return {self.engine.decode([tid]): lp for tid, lp in top.items()}


class RemoteChatBackend:
    """Any OpenAI-compatible server. Token counts for prompt budgeting use `count_tokens`, a local
    tokenizer of the same model where one is available (else a 4-characters-per-token estimate).

    A `structured_output` is sent as vLLM's `structured_outputs` field (which our server reads too);
    whether an unknown server applies it is not known, so `enforces_grammar` is False unless the
    caller knows (the supervised vLLM does: xgrammar), and callers check.
    """

    num_parameters: int | None = None

    def __init__(
        self,
        base_url: str,
        model_name: str,
        api_key: str = "none",
        count_tokens: Callable[[str], int] | None = None,
        enforces_grammar: bool = False,
        max_retries: int = 2,
    ) -> None:
        self.base_url, self._api_key, self._max_retries = base_url, api_key, max_retries
        self._clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.model_name = model_name
        self.enforces_grammar = enforces_grammar
        self._count = count_tokens or (lambda text: max(1, len(text) // 4))

    @property
    def client(self) -> Any:
        """The OpenAI client of the running event loop: pooled connections must not outlive their
        loop (a Celery worker runs each job in its own)."""
        from openai import AsyncOpenAI

        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = AsyncOpenAI(
                base_url=self.base_url, api_key=self._api_key, max_retries=self._max_retries
            )
        return client

    def count_tokens(self, text: str) -> int:
        return self._count(text)

    async def stream_chat(
        self, messages: list[dict], params: SamplingParams, request_id: str | None = None
    ) -> AsyncIterator[ChatDelta]:
        extra = {
            "top_k": params.top_k,
            "min_p": params.min_p,
            "repetition_penalty": params.repetition_penalty,
        }
        if params.cache_salt:
            extra["cache_salt"] = params.cache_salt  # vLLM and our server isolate prefix caches by it
        if params.structured_output is not None:
            extra["structured_outputs"] = structured_outputs_field(params.structured_output)
        span = GenerationSpan(self.model_name, params, request_id or "", "openai")
        stream = await self.client.chat.completions.create(
            model=self.model_name,
            messages=messages,
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            top_p=params.top_p,
            seed=params.seed,
            stop=params.stop or None,
            presence_penalty=params.presence_penalty,
            frequency_penalty=params.frequency_penalty,
            stream=True,
            stream_options={"include_usage": True},
            extra_body=extra,
        )
        finish_reason = None
        async for chunk in stream:
            if chunk.choices:
                choice = chunk.choices[0]
                finish_reason = choice.finish_reason or finish_reason
                if choice.delta and choice.delta.content:
                    span.token()
                    yield ChatDelta(choice.delta.content)
            if chunk.usage is not None:
                details = getattr(chunk.usage, "prompt_tokens_details", None)
                cached = getattr(details, "cached_tokens", 0) or 0
                usage = Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens, cached)
                span.finish(finish_reason, *usage.counts())
                yield ChatDelta(finished=True, finish_reason=finish_reason, usage=usage)

    async def top_logprobs(
        self, messages: list[dict], n: int = 20, cache_salt: str | None = None
    ) -> dict[str, float]:
        response = await self.client.chat.completions.create(
            model=self.model_name,
            messages=messages,
            max_tokens=1,
            temperature=0.0,
            logprobs=True,
            top_logprobs=n,
            extra_body={"cache_salt": cache_salt} if cache_salt else None,
        )
        choice = response.choices[0]
        content = choice.logprobs.content if choice.logprobs else None
        return {t.token: t.logprob for t in content[0].top_logprobs} if content else {}

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
        """One non-streamed turn through the standard `tools` API (vLLM constrains "required" and
        named choices with its structured outputs); the OpenAI client's ChatCompletion."""
        return await self.client.chat.completions.create(
            model=self.model_name,
            messages=messages,
            tools=tools,
            tool_choice=tool_choice,
            parallel_tool_calls=parallel,
            max_tokens=max_tokens,
            temperature=temperature,
            extra_body={"cache_salt": cache_salt} if cache_salt else None,
        )


def structured_outputs_field(spec: StructuredOutputSpec) -> dict:
    """A spec as vLLM's `structured_outputs` request field (the kinds the platform itself sends)."""
    if spec.kind == "grammar":
        return {"grammar": spec.ebnf}
    if spec.kind == "choice":
        return {"choice": list(spec.choices)}
    if spec.kind == "regex":
        return {"regex": spec.regex}
    if spec.kind == "json_schema":
        return {"json": spec.json_schema}
    if spec.kind == "json_object":
        return {"json_object": True}
    raise ValueError(f"cannot send a {spec.kind!r} constraint to a remote server")
