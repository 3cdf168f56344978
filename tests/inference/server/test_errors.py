"""Bad requests get 400 and overload gets 503 + Retry-After, in OpenAI's error shape; the server keeps
serving afterwards."""

from __future__ import annotations

import asyncio
import time

import httpx
import openai
import pytest

from inference.protocol import EngineError
from inference.server import create_app
from tests.inference.server.conftest import MAX_MODEL_LEN, MODEL_NAME, client_for, running, wait_until_idle

pytestmark = pytest.mark.slow

CHAT = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
LONG_TEXT = "word " * (MAX_MODEL_LEN + 10)


@pytest.mark.parametrize(
    ("path", "change", "param"),
    [
        ("/v1/chat/completions", {"model": "gpt-4o"}, "model"),
        ("/v1/chat/completions", {"messages": []}, "messages"),
        ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}, "messages.0.role"),
        ("/v1/chat/completions", {"messages": [{"content": "no role"}]}, "messages.0.role"),
        ("/v1/chat/completions", {"messages": "Hi"}, "messages"),
        ("/v1/chat/completions", {"max_tokens": 0}, "max_tokens"),
        ("/v1/chat/completions", {"max_completion_tokens": -3}, "max_completion_tokens"),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": LONG_TEXT}]}, "messages"),
        ("/v1/chat/completions", {"max_tokens": MAX_MODEL_LEN}, "max_tokens"),
        ("/v1/chat/completions", {"n": 2}, "n"),
        ("/v1/chat/completions", {"temperature": -1}, "temperature"),
        ("/v1/chat/completions", {"top_p": 0}, "top_p"),
        ("/v1/chat/completions", {"seed": 2**64}, "seed"),
        ("/v1/completions", {"prompt": "Hi", "messages": None, "seed": -(2**63) - 1}, "seed"),
        ("/v1/chat/completions", {"top_logprobs": 50, "logprobs": True}, "top_logprobs"),
        ("/v1/chat/completions", {"stop": 3}, "stop"),
        ("/v1/chat/completions", {"tools": [{"type": "function"}]}, None),
        ("/v1/chat/completions", {"response_format": {"type": "json_schema"}}, None),
        ("/v1/completions", {"prompt": "", "messages": None}, "prompt"),
        ("/v1/completions", {"prompt": ["two", "prompts"], "messages": None}, "prompt"),
        ("/v1/completions", {"prompt": LONG_TEXT, "messages": None}, "prompt"),
        ("/v1/completions", {"prompt": [1, 2, 10**9], "messages": None}, None),
    ],
)
def test_bad_request_is_a_400_in_openai_shape(base_url, path, change, param):
    body = {**CHAT, **change}
    if path == "/v1/completions":
        body.pop("messages")
    response = httpx.post(base_url + path, json=body, timeout=60)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["message"]
    assert error["param"] == param


def test_n_greater_than_one_is_refused_clearly(client):
    with pytest.raises(openai.BadRequestError, match="only n=1 is supported"):
        client.chat.completions.create(model=MODEL_NAME, messages=CHAT["messages"], n=3)


def test_full_waiting_queue_gives_503_with_retry_after_and_the_server_recovers(base_url, engine, client):
    # The session engine runs 2 sequences and lets 1 wait: two long streams fill the batch, a third
    # request waits, and a fourth finds the queue full.
    long = {**CHAT, "max_tokens": 400, "temperature": 0, "stream": True}

    async def scenario() -> tuple[httpx.Response, httpx.Response]:
        async with httpx.AsyncClient(base_url=base_url, timeout=120) as http:
            # NOTE: a stream's headers arrive with its first token, so each is running once entered.
            async with (
                http.stream("POST", "/v1/chat/completions", json=long),
                http.stream("POST", "/v1/chat/completions", json=long),
            ):
                waiting = asyncio.create_task(http.post("/v1/chat/completions", json=CHAT))
                deadline = time.monotonic() + 30
                while engine.stats().num_waiting < 1:
                    assert time.monotonic() < deadline and not waiting.done()
                    await asyncio.sleep(0.01)
                rejected = await http.post("/v1/chat/completions", json=CHAT)
            return rejected, await waiting

    rejected, waited = asyncio.run(scenario())
    assert rejected.status_code == 503
    assert int(rejected.headers["Retry-After"]) >= 1
    assert rejected.json()["error"]["type"] == "server_overloaded"
    assert waited.status_code == 200 and waited.json()["choices"][0]["message"]["content"]
    reply = client.chat.completions.create(model=MODEL_NAME, messages=CHAT["messages"], max_tokens=4)
    assert reply.choices[0].message.content
    wait_until_idle(engine)  # the two long streams were aborted when their clients closed them


class FailsMidStream:
    """The real engine, except that each request breaks with an engine error after its first delta
    (a real engine fails like this only on an internal fault)."""

    def __init__(self, engine) -> None:
        self._engine = engine

    def __getattr__(self, name: str):
        return getattr(self._engine, name)

    async def generate(self, request_id, prompt_token_ids, params):
        async for output in self._engine.generate(request_id, prompt_token_ids, params):
            yield output
            break
        raise EngineError("the engine fell over")


def test_engine_failure_midway_reaches_the_client_as_an_error_event(engine):
    with running(create_app(FailsMidStream(engine), MODEL_NAME)) as url:
        client = client_for(url)
        stream = client.chat.completions.create(
            model=MODEL_NAME, messages=CHAT["messages"], max_tokens=50, stream=True
        )
        with pytest.raises(openai.APIError, match="the engine fell over"):
            list(stream)
        # The server survives and answers the next request.
        assert client.models.list().data[0].id == MODEL_NAME
