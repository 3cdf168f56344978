"""Engine configuration comes from EngineSettings and is validated once."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from core.settings.engine import EngineSettings
from inference.config import EngineConfig, ModelConfig, resolve_kv_cache_dtype


@pytest.mark.unit
def test_from_settings_carries_every_knob(tiny_llama, tmp_path):
    settings = EngineSettings(
        block_size=8,
        kv_cache_memory_gb=0.5,
        max_num_seqs=3,
        max_num_batched_tokens=99,
        prefill_chunk_size=7,
        max_waiting=5,
        max_model_len=100,
        device="cpu",
        dtype="bfloat16",
        enable_prefix_caching=False,
        cpu_threads=1,
        speculative="draft",
        num_speculative_tokens=3,
        draft_model=str(tiny_llama),
        spec_max_batch=2,
        spec_max_tokens=16,
        prompt_lookup_min=1,
        prompt_lookup_max=4,
        cpu_packed_rows=0,
        enforce_eager=True,
        attention_backend="torch",
        kv_cache_dtype="float16",
    )
    cfg = EngineConfig.from_settings(settings, tiny_llama, cache_dir=tmp_path)
    assert (cfg.block_size, cfg.max_num_seqs, cfg.max_num_batched_tokens, cfg.prefill_chunk_size) == (
        8,
        3,
        99,
        7,
    )
    assert (cfg.max_waiting, cfg.max_model_len, cfg.cache_dir) == (5, 100, tmp_path)
    assert cfg.device == torch.device("cpu") and cfg.dtype == torch.bfloat16
    assert not cfg.enable_prefix_caching and cfg.cpu_threads == 1
    assert (cfg.speculative, cfg.num_speculative_tokens, cfg.draft_model_path, cfg.spec_max_batch) == (
        "draft",
        3,
        tiny_llama,
        2,
    )
    assert (cfg.spec_max_tokens, cfg.prompt_lookup_min, cfg.prompt_lookup_max, cfg.cpu_packed_rows) == (
        16,
        1,
        4,
        0,
    )
    assert cfg.enforce_eager and cfg.attention_backend == "torch" and cfg.kv_cache_dtype == "float16"
    assert EngineConfig.from_settings(EngineSettings(device="cpu"), tiny_llama).dtype == torch.float32


@pytest.mark.unit
def test_the_library_and_the_platform_share_their_defaults(tiny_llama):
    assert EngineConfig(tiny_llama) == EngineConfig.from_settings(EngineSettings(), tiny_llama)
    assert EngineConfig(tiny_llama).speculative == EngineSettings().speculative == "prompt_lookup"


@pytest.mark.unit
def test_every_engine_setting_reaches_the_engine():
    # from_settings carries fields by name: a setting that matches no field would be dropped silently.
    carried = {f.name for f in dataclasses.fields(EngineConfig)} | {"draft_model"}
    # The serving settings choose a server for the platform (inference/provider.py), not engine knobs.
    serving = {"llm_base_url", "backend", "replicas", "vllm", "router"}
    # One Foreground per process, which the provider hands to each engine it starts.
    provider = {"foreground_share"}
    assert set(EngineSettings.model_fields) - carried == serving | provider


@pytest.mark.unit
@pytest.mark.parametrize(
    "bad",
    [
        {"block_size": 0},
        {"max_num_seqs": -1},
        {"kv_cache_memory_gb": 0},
        {"speculative": "medusa"},
        {"speculative": "draft"},  # without a draft model
        {"speculative": "prompt_lookup", "num_speculative_tokens": 0},
        {"prompt_lookup_min": 3, "prompt_lookup_max": 2},
        {"spec_max_tokens": 0},
        {"cpu_packed_rows": -1},
        {"attention_backend": "flash"},
        {"gguf_quantized": "yes"},
        {"kv_cache_dtype": "int8"},
    ],
)
def test_bad_values_are_rejected(tiny_llama, bad):
    with pytest.raises(ValueError):
        EngineConfig(tiny_llama, **bad)


@pytest.mark.unit
def test_the_kv_cache_is_bf16_on_cpu_for_weights_kept_quantized(tiny_llama):
    """auto: bf16 for a CPU engine serving 4/8-bit weights, the model's dtype otherwise; a dtype other
    than the model's is refused off CPU (the GPU kernels read the model's)."""
    cpu = EngineConfig(tiny_llama, device="cpu", dtype=torch.float32)
    assert resolve_kv_cache_dtype(cpu, weights_kept_quantized=True) == torch.bfloat16
    assert resolve_kv_cache_dtype(cpu, weights_kept_quantized=False) == torch.float32
    cpu.kv_cache_dtype = "float32"
    assert resolve_kv_cache_dtype(cpu, weights_kept_quantized=True) == torch.float32
    cuda = EngineConfig(tiny_llama, device="cuda", dtype=torch.bfloat16)
    assert resolve_kv_cache_dtype(cuda, weights_kept_quantized=True) == torch.bfloat16
    cuda.kv_cache_dtype = "float32"
    with pytest.raises(ValueError, match="CPU only"):
        resolve_kv_cache_dtype(cuda, weights_kept_quantized=False)


@pytest.mark.unit
def test_missing_model_is_reported(tmp_path):
    with pytest.raises(FileNotFoundError):
        EngineConfig(tmp_path / "nope.gguf")


@pytest.mark.unit
def test_model_config_reads_old_and_new_rope_keys():
    base = dict(
        model_type="llama",
        vocab_size=10,
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
    )
    old = ModelConfig.from_hf_dict(
        {**base, "rope_theta": 5.0, "rope_scaling": {"type": "linear", "factor": 2.0}}
    )
    new = ModelConfig.from_hf_dict(
        {**base, "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 5.0}}
    )
    assert old == new and old.rope_theta == 5.0 and old.rope_scaling == {"rope_type": "linear", "factor": 2.0}
    assert old.num_kv_heads == 2 and old.head_dim == 4
    with pytest.raises(ValueError, match="yarn"):
        ModelConfig.from_hf_dict({**base, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})
    with pytest.raises(ValueError, match="model_type"):
        ModelConfig.from_hf_dict({**base, "model_type": "gpt2"})


@pytest.mark.unit
def test_settings_reject_a_prompt_lookup_range_that_is_empty():
    with pytest.raises(ValueError, match="prompt_lookup_min \\(4\\) is above prompt_lookup_max \\(3\\)"):
        EngineSettings(prompt_lookup_min=4, prompt_lookup_max=3)
