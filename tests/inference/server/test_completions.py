"""The official openai client against the server, with the real engine and SmolLM2 behind it."""

from __future__ import annotations

import httpx
import pytest

from tests.inference.server.conftest import MODEL_NAME

pytestmark = pytest.mark.slow

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def test_models_lists_the_served_model(client):
    models = client.models.list().data
    assert [m.id for m in models] == [MODEL_NAME]
    assert client.models.retrieve(MODEL_NAME).id == MODEL_NAME


def test_chat_completion(client):
    response = client.chat.completions.create(
        model=MODEL_NAME, messages=QUESTION, max_tokens=24, temperature=0
    )
    choice = response.choices[0]
    assert response.object == "chat.completion" and response.id.startswith("chatcmpl-")
    assert choice.message.role == "assistant"
    assert "Paris" in choice.message.content
    assert choice.finish_reason == "stop"  # the model ends its answer with <|im_end|>
    usage = response.usage
    assert usage.prompt_tokens > 10 and 0 < usage.completion_tokens < 24
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_completion_takes_text_or_token_ids(client, engine):
    prompt = "The three primary colours are"
    kwargs = dict(model=MODEL_NAME, max_tokens=8, temperature=0)
    by_text = client.completions.create(prompt=prompt, **kwargs)
    by_ids = client.completions.create(prompt=engine.encode(prompt), **kwargs)
    assert by_text.object == "text_completion"
    assert by_text.choices[0].text.strip() and by_text.choices[0].text == by_ids.choices[0].text
    assert by_text.choices[0].finish_reason == "length"
    assert by_text.usage.completion_tokens == 8
    assert by_text.usage.prompt_tokens == by_ids.usage.prompt_tokens == len(engine.encode(prompt))


def test_chat_stream_with_usage_matches_the_plain_call(client):
    kwargs = dict(model=MODEL_NAME, messages=QUESTION, max_tokens=24, temperature=0)
    plain = client.chat.completions.create(**kwargs)
    stream = client.chat.completions.create(**kwargs, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    with_choices = [c for c in chunks if c.choices]
    assert "".join(c.choices[0].delta.content or "" for c in with_choices) == plain.choices[0].message.content
    assert with_choices[-1].choices[0].finish_reason == plain.choices[0].finish_reason
    assert [c.choices[0].finish_reason for c in with_choices[:-1]] == [None] * (len(with_choices) - 1)
    # The last chunk carries only the usage; the others carry none.
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-1].usage.prompt_tokens == plain.usage.prompt_tokens
    assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens
    assert chunks[-1].usage.total_tokens == plain.usage.total_tokens


def test_completion_stream_without_usage(client):
    kwargs = dict(model=MODEL_NAME, prompt="Once upon a time", max_tokens=6, temperature=0)
    plain = client.completions.create(**kwargs)
    chunks = list(client.completions.create(**kwargs, stream=True))
    assert "".join(c.choices[0].text for c in chunks) == plain.choices[0].text
    assert chunks[-1].choices[0].finish_reason == "length"
    assert all(c.usage is None for c in chunks)


def test_stop_string_ends_the_text_before_it(client):
    response = client.chat.completions.create(
        model=MODEL_NAME, messages=QUESTION, max_tokens=24, temperature=0, stop=[" Paris", "London"]
    )
    choice = response.choices[0]
    assert choice.finish_reason == "stop"
    assert "Paris" not in choice.message.content and choice.message.content.startswith("The capital")


def test_max_tokens_gives_finish_reason_length(client):
    response = client.chat.completions.create(
        model=MODEL_NAME, messages=QUESTION, max_completion_tokens=3, temperature=0
    )
    assert response.choices[0].finish_reason == "length"
    assert response.usage.completion_tokens == 3


def test_chat_logprobs(client):
    response = client.chat.completions.create(
        model=MODEL_NAME, messages=QUESTION, max_tokens=5, temperature=0, logprobs=True, top_logprobs=3
    )
    entries = response.choices[0].logprobs.content
    assert len(entries) == response.usage.completion_tokens
    for entry in entries:
        assert len(entry.top_logprobs) == 3
        # Greedy: the chosen token is the most likely one.
        assert entry.logprob <= 0
        assert entry.logprob == pytest.approx(max(t.logprob for t in entry.top_logprobs))
    assert "".join(e.token for e in entries) == response.choices[0].message.content


def test_extra_sampling_fields_are_accepted(client):
    def sample():
        return client.chat.completions.create(
            model=MODEL_NAME,
            messages=QUESTION,
            max_tokens=8,
            temperature=0.8,
            top_p=0.9,
            seed=7,
            presence_penalty=0.5,
            frequency_penalty=0.5,
            extra_body={"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1},
        )

    response, again = sample(), sample()
    assert response.choices[0].message.content == again.choices[0].message.content  # same seed


def test_streamed_logprobs_cover_every_token(client):
    kwargs = dict(model=MODEL_NAME, prompt="The sun rises in the", max_tokens=6, temperature=0, logprobs=2)
    plain = client.completions.create(**kwargs)
    chunks = list(client.completions.create(**kwargs, stream=True))
    streamed = [t for c in chunks if c.choices[0].logprobs for t in c.choices[0].logprobs.token_logprobs]
    assert streamed == pytest.approx(plain.choices[0].logprobs.token_logprobs)
    assert len(streamed) == plain.usage.completion_tokens
    offsets = plain.choices[0].logprobs.text_offset
    assert offsets[0] == 0 and offsets == sorted(offsets)


def test_null_optional_fields_mean_defaults(base_url):
    # Some clients send null for every parameter they leave unset; OpenAI accepts that.
    nulls = dict.fromkeys(
        [
            "temperature",
            "top_p",
            "n",
            "stop",
            "seed",
            "presence_penalty",
            "frequency_penalty",
            "stream",
            "stream_options",
            "logprobs",
            "top_logprobs",
            "max_completion_tokens",
            "top_k",
            "tools",
        ]
    )
    body = {"model": MODEL_NAME, "messages": QUESTION, "max_tokens": 4, **nulls}
    response = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=60)
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["completion_tokens"] == 4


def test_client_cache_salts_are_keyed_so_a_tenant_id_does_not_open_its_cache(client, engine):
    import asyncio

    from inference.protocol import SamplingParams

    prompt = "Groundwork keeps each tenant's prefix cache apart from every other tenant's. " * 3
    ids = engine.encode(prompt)

    async def in_process() -> int:  # what the platform does for tenant "tenant-1" (api/routers/ask.py)
        params = SamplingParams(max_tokens=1, temperature=0, cache_salt="tenant-1")
        return [o async for o in engine.generate("salted-in-process", ids, params)][-1].num_cached_tokens

    asyncio.run(in_process())

    def cached(salt: str) -> int:
        out = client.completions.create(
            model=MODEL_NAME, prompt=ids, max_tokens=1, temperature=0, extra_body={"cache_salt": salt}
        )
        return out.usage.prompt_tokens_details.cached_tokens

    assert cached("tenant-1") == 0  # the platform's tenant salt, named by a client: no hit
    assert cached("tenant-1") >= 16  # a client's own salt still shares with itself
