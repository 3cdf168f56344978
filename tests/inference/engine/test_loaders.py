"""Loaders: GGUF tensor names and rope layout map back to HF; converted weights are cached."""

from __future__ import annotations

import numpy as np
import pytest

from inference.loaders import gguf_file
from inference.loaders.gguf_file import cached_hf_dir, hf_name, unpermute_rope


def llama_cpp_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """What llama.cpp's convert_hf_to_gguf.py does to q/k weights (the reference we invert)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


@pytest.mark.unit
@pytest.mark.parametrize("shape", [(24, 5), (24,)])
def test_unpermute_inverts_llama_cpp_permute(shape):
    w = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    permuted = llama_cpp_permute(w, 3)
    assert not np.array_equal(permuted, w)
    assert np.array_equal(unpermute_rope(permuted, 3), w)


@pytest.mark.unit
def test_gguf_names_map_to_hf():
    assert hf_name("token_embd.weight") == "model.embed_tokens.weight"
    assert hf_name("blk.12.attn_q.bias") == "model.layers.12.self_attn.q_proj.bias"
    assert hf_name("blk.0.ffn_down.weight") == "model.layers.0.mlp.down_proj.weight"
    assert hf_name("output.weight") == "lm_head.weight"
    with pytest.raises(KeyError):
        hf_name("blk.0.attn_qkv.weight")


@pytest.mark.slow
def test_gguf_conversion_is_cached(smollm2_engine, smollm2_path, model_cache, monkeypatch):
    # smollm2_engine converted the file into model_cache; a second load must not convert again.
    def fail(*args):
        raise AssertionError("converted twice")

    monkeypatch.setattr(gguf_file, "convert", fail)
    directory = cached_hf_dir(smollm2_path, model_cache)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in directory.iterdir()}
    assert directory.name == gguf_file.file_sha256(smollm2_path)


QUANT_TOLERANCE = {
    "Q8_0": 0.01,
    "Q5_0": 0.05,
    "Q5_1": 0.05,
    "Q4_0": 0.1,
    "Q4_1": 0.1,
    "F16": 1e-3,
    "F32": 0.0,
}


def write_tiny_gguf(path, hf_state: dict, cfg) -> dict[str, str]:
    """A llama.cpp-style GGUF of `hf_state`: q/k permuted, other tensors in rotating quant types."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_vocab_size(cfg.vocab_size)
    to_gguf = {v: k for k, v in {n: hf_name(n) for n in _gguf_names(cfg.num_hidden_layers)}.items()}
    kinds = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "F16"]
    used = {}
    for i, (name, tensor) in enumerate(sorted(hf_state.items())):
        w = tensor.float().numpy()
        if name.endswith(("q_proj.weight", "k_proj.weight")):
            heads = cfg.num_attention_heads if "q_proj" in name else cfg.num_key_value_heads
            w, kind = llama_cpp_permute(w, heads), "F32"  # exact, so the unpermutation is checked exactly
        else:
            kind = "F32" if w.ndim == 1 else kinds[i % len(kinds)]
        qtype = gguf.GGMLQuantizationType[kind]
        data = (
            w if kind == "F32" else w.astype(np.float16) if kind == "F16" else gguf.quants.quantize(w, qtype)
        )
        writer.add_tensor(to_gguf[name], data, raw_dtype=qtype)
        used[name] = kind
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return used


def _gguf_names(layers: int) -> list[str]:
    per_layer = [
        "attn_norm",
        "ffn_norm",
        "attn_q",
        "attn_k",
        "attn_v",
        "attn_output",
        "ffn_gate",
        "ffn_up",
        "ffn_down",
    ]
    names = ["token_embd.weight", "output_norm.weight", "output.weight"]
    return names + [f"blk.{i}.{k}.weight" for i in range(layers) for k in per_layer]


@pytest.mark.unit
def test_tiny_gguf_weights_and_config_map_back_to_hf(tiny_llama, tmp_path):
    import torch
    from gguf import GGUFReader
    from safetensors.torch import load_file
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(str(tiny_llama))
    hf_state = load_file(str(tiny_llama / "model.safetensors"))
    used = write_tiny_gguf(tmp_path / "tiny.gguf", hf_state, cfg)
    assert {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "F16", "F32"} <= set(used.values())

    reader = GGUFReader(str(tmp_path / "tiny.gguf"))
    converted = gguf_file.hf_config(reader)
    assert converted["num_key_value_heads"] == cfg.num_key_value_heads and converted["model_type"] == "llama"
    assert converted["hidden_size"] == cfg.hidden_size and not converted["tie_word_embeddings"]
    weights = gguf_file.read_weights(reader, converted)
    assert set(weights) == set(hf_state)
    for name, tensor in hf_state.items():
        err = (weights[name] - tensor).abs().max().item()
        assert err <= QUANT_TOLERANCE[used[name]] * max(1.0, tensor.abs().max().item()), (
            name,
            used[name],
            err,
        )
    assert torch.equal(
        weights["model.layers.0.self_attn.q_proj.weight"], hf_state["model.layers.0.self_attn.q_proj.weight"]
    )
