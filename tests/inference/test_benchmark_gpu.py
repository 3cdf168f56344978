"""The GPU benchmark's checks run on CPU over a tiny shape (graphs off): they cannot rot between GPU runs."""

from __future__ import annotations

import pytest
import torch

from benchmarks import gpu_checks, gpu_models

pytestmark = pytest.mark.slow

TINY = dict(
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=2048,
    tie_word_embeddings=True,
)


def test_parity_and_equality_checks_pass_on_cpu(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_models, "DEVICE", "cpu")
    monkeypatch.setattr(gpu_checks, "KV_CACHE_GB", 0.05)
    monkeypatch.setitem(gpu_models.SHAPES, "tiny", TINY)
    path, hf = gpu_models.make_checkpoint("tiny", root=tmp_path)
    results = gpu_checks.parity(path, hf, torch.float32) + gpu_checks.equality(path, torch.float32, 512)
    assert len(results) == 10
    assert all(r["passed"] for r in results), [r for r in results if not r["passed"]]
    by_name = {r["check"].split(": ", 1)[1]: r for r in results}
    assert by_name["preemption (small KV pool)"]["count"] > 0
    assert by_name["prefix hits (second pass)"]["prefix_cache_hits"] > 0
    assert by_name["prompt lookup (speculative)"]["count"] > 0
