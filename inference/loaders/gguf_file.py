"""GGUF files (llama.cpp): dequantize to fp32 and rewrite as an HF directory that `hf_dir` loads.

The conversion is cached under `cache_dir/<sha256 of the file>/` (config.json, model.safetensors,
tokenizer files), so only the first load pays for dequantization and tokenizer reconstruction.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gguf import GGUFReader
from gguf.quants import dequantize
from safetensors.torch import save_file
from transformers import AutoTokenizer

from inference.config import SUPPORTED_ARCHITECTURES
from inference.quant.gguf_blocks import cat_rows, take_rows, to_quant
from inference.quant.kernel import QuantWeight

log = logging.getLogger(__name__)

_LAYER_TENSORS = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_GLOBAL_TENSORS = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 23):
            digest.update(chunk)
    return digest.hexdigest()


def hf_name(gguf_name: str) -> str:
    stem, _, suffix = gguf_name.rpartition(".")
    if stem in _GLOBAL_TENSORS:
        return f"{_GLOBAL_TENSORS[stem]}.{suffix}"
    blk, layer, kind = stem.split(".")
    if blk != "blk" or kind not in _LAYER_TENSORS:
        raise KeyError(f"unsupported GGUF tensor {gguf_name!r}")
    return f"model.layers.{layer}.{_LAYER_TENSORS[kind]}.{suffix}"


def unpermute_rope(w: np.ndarray, num_heads: int) -> np.ndarray:
    """Undo llama.cpp's reordering of q/k rows (interleaved rotary pairs) back to HF's rotate_half order."""
    rows = w.shape[0]
    return w.reshape(num_heads, rows // num_heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _field(reader: GGUFReader, key: str, default: Any = None) -> Any:
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def hf_config(reader: GGUFReader) -> dict[str, Any]:
    arch = _field(reader, "general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise ValueError(f"unsupported GGUF architecture {arch!r}; have {sorted(SUPPORTED_ARCHITECTURES)}")
    if any(t.name == "rope_freqs.weight" for t in reader.tensors):
        raise ValueError(
            "GGUF with precomputed rope_freqs (Llama 3.1 scaling) is not supported; use the HF dir"
        )
    heads = _field(reader, f"{arch}.attention.head_count")
    hidden = _field(reader, f"{arch}.embedding_length")
    cfg: dict[str, Any] = {
        "architectures": [SUPPORTED_ARCHITECTURES[arch]],
        "model_type": arch,
        "vocab_size": _field(reader, f"{arch}.vocab_size")
        or len(reader.fields["tokenizer.ggml.tokens"].data),
        "hidden_size": hidden,
        "intermediate_size": _field(reader, f"{arch}.feed_forward_length"),
        "num_hidden_layers": _field(reader, f"{arch}.block_count"),
        "num_attention_heads": heads,
        "num_key_value_heads": _field(reader, f"{arch}.attention.head_count_kv", heads),
        "head_dim": _field(reader, f"{arch}.attention.key_length", hidden // heads),
        "rms_norm_eps": _field(reader, f"{arch}.attention.layer_norm_rms_epsilon", 1e-6),
        "rope_theta": _field(reader, f"{arch}.rope.freq_base", 10000.0),
        "max_position_embeddings": _field(reader, f"{arch}.context_length", 2048),
        "tie_word_embeddings": not any(t.name == "output.weight" for t in reader.tensors),
        "bos_token_id": _field(reader, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": _field(reader, "tokenizer.ggml.eos_token_id"),
    }
    if _field(reader, f"{arch}.rope.scaling.type", "none") == "linear":
        cfg["rope_scaling"] = {"rope_type": "linear", "factor": _field(reader, f"{arch}.rope.scaling.factor")}
    elif _field(reader, f"{arch}.rope.scaling.type", "none") != "none":
        raise ValueError("unsupported GGUF rope scaling " + _field(reader, f"{arch}.rope.scaling.type"))
    return cfg


def read_weights(reader: GGUFReader, cfg: dict[str, Any]) -> dict[str, torch.Tensor]:
    permute_heads = {"attn_q": cfg["num_attention_heads"], "attn_k": cfg["num_key_value_heads"]}
    weights = {}
    for t in reader.tensors:
        w = np.array(dequantize(t.data, t.tensor_type), dtype=np.float32)  # copy: data is a read-only memmap
        kind = t.name.split(".")[-2]
        # NOTE: llama.cpp permutes q/k only for the llama architecture (qwen2 keeps HF order).
        if cfg["model_type"] == "llama" and kind in permute_heads:
            w = unpermute_rope(w, permute_heads[kind])
        weights[hf_name(t.name)] = torch.from_numpy(np.ascontiguousarray(w))
    return weights


def read_quantized(gguf_path: Path) -> dict[str, QuantWeight]:
    """The GGUF's quantized projections as `LlamaForCausalLM.use_quantized` takes them (fused q/k/v and
    gate/up; "head" is the output matrix, or the tied embedding); float tensors are left out."""
    reader = GGUFReader(str(gguf_path))
    cfg = hf_config(reader)
    permute_heads = {"attn_q": cfg["num_attention_heads"], "attn_k": cfg["num_key_value_heads"]}
    parts: dict[str, QuantWeight] = {}
    for t in reader.tensors:
        if len(t.shape) != 2:
            continue
        cols, rows = (int(x) for x in t.shape)
        w = to_quant(t.data, t.tensor_type, rows, cols)
        if w is None:
            continue
        kind = t.name.split(".")[-2]
        if cfg["model_type"] == "llama" and kind in permute_heads:
            w = take_rows(w, torch.from_numpy(unpermute_rope(np.arange(rows), permute_heads[kind])))
        parts[t.name.removesuffix(".weight")] = w
    head = parts.get("output", parts.get("token_embd"))
    out: dict[str, QuantWeight] = {} if head is None else {"head": head}
    fused = {"qkv_proj": ("attn_q", "attn_k", "attn_v"), "o_proj": ("attn_output",),
             "gate_up_proj": ("ffn_gate", "ffn_up"), "down_proj": ("ffn_down",)}  # fmt: skip
    for i in range(cfg["num_hidden_layers"]):
        for name, kinds in fused.items():
            found = [parts.get(f"blk.{i}.{k}") for k in kinds]
            if all(w is not None for w in found):
                out[f"layers.{i}.{name}"] = cat_rows(found)
    return out


def convert(gguf_path: Path, out_dir: Path) -> None:
    """Write `gguf_path` as an HF checkpoint directory (fp32 safetensors) into `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    reader = GGUFReader(str(gguf_path))
    cfg = hf_config(reader)
    save_file(read_weights(reader, cfg), str(out_dir / "model.safetensors"))
    (out_dir / "config.json").write_text(json.dumps(cfg, indent=2))
    AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name).save_pretrained(
        str(out_dir)
    )


def cached_hf_dir(gguf_path: Path, cache_dir: Path) -> Path:
    """The converted directory of `gguf_path` in `cache_dir`, converting it on first use."""
    final = cache_dir / file_sha256(gguf_path)
    if (final / "config.json").exists():
        return final
    log.info("converting %s to fp32 safetensors in %s (first load only)", gguf_path, final)
    tmp = cache_dir / f"{final.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    convert(gguf_path, tmp)
    try:
        os.replace(tmp, final)  # readers see either no directory or a complete one
    except OSError:  # another process won the race; its copy is identical
        shutil.rmtree(tmp, ignore_errors=True)
    return final
