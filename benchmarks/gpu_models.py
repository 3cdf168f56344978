"""Random-weight checkpoints of real model shapes for the GPU benchmark (no model files needed).

Each checkpoint is a transformers Llama with a word-level tokenizer of the same vocabulary size,
written to a temporary directory (in memory where /dev/shm exists), so our engine loads it through
its ordinary safetensors path and transformers runs the very same weights.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

EOS = 2
DEVICE = "cuda"  # the CPU is only for dry runs of the script's logic
SHAPES: dict[str, dict[str, Any]] = {
    "smollm2-135m": dict(
        vocab_size=49152,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        rope_theta=100000.0,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
    ),
    "llama-1b": dict(  # Llama 3.2 1B's shape
        vocab_size=128256,
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        rope_theta=500000.0,
        rope_scaling={
            "rope_type": "llama3",
            "factor": 32.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        max_position_embeddings=131072,
        tie_word_embeddings=True,
    ),
}


def word_tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    """Token i is the word `t{i}`: every id decodes, whatever the vocabulary size."""
    vocab = {f"t{i}": i for i in range(vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=f"t{EOS}", pad_token="t0")


def _scratch_dir() -> Path:
    """/dev/shm where it has room for the largest fp32 checkpoint (~5 GB) several times, else /tmp."""
    shm = Path("/dev/shm")
    if shm.is_dir() and shutil.disk_usage(shm).free > 16 * 2**30:
        return shm
    return Path(tempfile.gettempdir())


def make_checkpoint(
    shape: str, root: Path | None = None, init_std: float = 0.02, embed_std: float = 0.2
) -> tuple[Path, LlamaForCausalLM]:
    """Write a seeded random model of `shape` (fp32) and return its directory and the HF model.

    The layers keep HF's initialisation (std 0.02): larger weights saturate attention and make the
    network chaotic, so bf16 rounding differences between two correct implementations grow into
    different logits (measured with std 0.2 everywhere: 0.5-0.6 relative error on every path, fp32
    exact). The tied embedding (the LM head) gets `embed_std` 0.2, so logits are peaked and greedy
    choices are far from ties.
    """
    base = root or _scratch_dir()
    directory = Path(tempfile.mkdtemp(prefix=f"gw-{shape}-", dir=base))
    cfg = LlamaConfig(**SHAPES[shape], initializer_range=init_std, eos_token_id=EOS, bos_token_id=1)
    torch.manual_seed(0)
    with torch.device(DEVICE):
        model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        model.get_input_embeddings().weight.normal_(0.0, embed_std)
    model.save_pretrained(str(directory))
    word_tokenizer(cfg.vocab_size).save_pretrained(str(directory))
    return directory, model
