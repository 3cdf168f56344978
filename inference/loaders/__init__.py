"""Load a model and its tokenizer from a GGUF file or an HF safetensors directory."""

from __future__ import annotations

import logging
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase

from inference.loaders.gguf_file import cached_hf_dir, convert, read_quantized
from inference.loaders.hf_dir import iter_weights, load_tokenizer, read_model_config
from inference.models.linear import kernel_rows, quant_max_rows, with_dense_copy
from inference.models.llama import LlamaForCausalLM
from inference.quant.decode_layer import FusedDecode
from inference.quant.kernel import load_kernel, native_bf16

log = logging.getLogger(__name__)

# NOTE: `quantized="auto"` keeps a GGUF 4/8-bit when its fp32 weights would pass this size. Smaller models
# (the packaged SmolLM2: 538 MB) stay fp32, the precision the platform's answer evals were measured at;
# larger ones (Qwen2.5-0.5B: 2 GB in fp32, 1.5B: 6 GB, 3B: 12 GB) would take 4-7x the memory and bytes
# read per token of their quantized form.
AUTO_QUANTIZED_MIN_BYTES = 1 << 30


@contextmanager
def hf_directory(path: Path, cache_dir: Path | None) -> Iterator[Path]:
    """An HF checkpoint directory for `path`; GGUF files are converted (cached if `cache_dir` is set)."""
    if path.is_dir():
        yield path
    elif path.suffix != ".gguf":
        raise ValueError(f"expected a .gguf file or an HF checkpoint directory, got {path}")
    elif cache_dir is not None:
        yield cached_hf_dir(path, cache_dir)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            convert(path, Path(tmp))
            yield Path(tmp)


def load_model(
    path: Path,
    cache_dir: Path | None,
    device: torch.device,
    dtype: torch.dtype,
    quantized: bool | str = False,
) -> tuple[LlamaForCausalLM, PreTrainedTokenizerBase]:
    """The model and its tokenizer; with `quantized` (True, or "auto" for a model larger than
    AUTO_QUANTIZED_MIN_BYTES in fp32), a GGUF's quantized projections stay 4/8-bit on an fp32 CPU model
    (inference/quant/), where the kernel builds."""
    with hf_directory(path, cache_dir) as directory:
        cfg = read_model_config(directory)
        tokenizer = load_tokenizer(directory)
        # NOTE: built on the meta device so no time goes into a random init that load_weights overwrites;
        # load_weights raises if any parameter is left unset.
        with torch.device("meta"):
            model = LlamaForCausalLM(cfg)
        # NOTE: cast on the meta device, then allocate: the weights land on the device in their
        # target dtype directly (no fp32 copy of the model on the GPU first).
        model = model.to(dtype).to_empty(device=device)
        model.load_weights(iter_weights(directory))
    fp32_cpu = device.type == "cpu" and dtype == torch.float32
    if quantized == "auto":
        fp32_bytes = 4 * sum(p.numel() for p in model.parameters())
        quantized = fp32_bytes > AUTO_QUANTIZED_MIN_BYTES
        log.info("gguf_quantized auto: %s (fp32 weights %.0f MB)", quantized, fp32_bytes / 1e6)
    if quantized and path.suffix == ".gguf" and fp32_cpu and load_kernel(cache_dir) is not None:
        weights = read_quantized(path)
        if native_bf16():
            rows = kernel_rows(sum(w.nbytes for w in weights.values()))
            weights = {name: with_dense_copy(w, rows) for name, w in weights.items()}
        model.use_quantized(weights)
        model.fused = FusedDecode.build(model, cache_dir)
        kinds = Counter(f"{w.source}->{w.kind}" for w in weights.values())
        dense = sum(w.dense.numel() * 2 for w in weights.values() if w.dense is not None)
        log.info(
            "GGUF weights kept quantized (%.0f MB): %s; our kernel up to %d rows; bf16 copies: %.0f MB",
            sum(w.nbytes for w in weights.values()) / 1e6,
            ", ".join(f"{n} x {k}" for k, n in sorted(kinds.items())),
            quant_max_rows(next(iter(weights.values()))),
            dense / 1e6,
        )
    return model.eval(), tokenizer


__all__ = ["hf_directory", "load_model"]
