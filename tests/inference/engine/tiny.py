"""Tiny random-weight HF checkpoints (Llama / Qwen2) with a small byte-level BPE tokenizer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from tokenizers import ByteLevelBPETokenizer
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_TEXT = [
    "The quick brown fox jumps over the lazy dog. " * 3,
    "Paged attention stores keys and values in fixed-size blocks of tokens.",
    "Hello world! Bonjour le monde. 0123456789 + - * / = ( ) [ ] { } < > , ; : ' \" ?",
]


def make_tokenizer() -> PreTrainedTokenizerFast:
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(_TEXT, vocab_size=509, min_frequency=1, special_tokens=[])
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", bos_token="<|im_start|>")
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<|pad|>"]})
    tok.chat_template = CHAT_TEMPLATE
    return tok


def save_tiny_model(directory: Path, family: str = "llama", **overrides: Any) -> Path:
    """Write a seeded random model of `family` ("llama" or "qwen2") and the tiny tokenizer to `directory`."""
    tok = make_tokenizer()
    cfg_cls, model_cls = (
        (LlamaConfig, LlamaForCausalLM) if family == "llama" else (Qwen2Config, Qwen2ForCausalLM)
    )
    kwargs: dict[str, Any] = dict(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        initializer_range=0.2,
        tie_word_embeddings=False,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.bos_token_id,
    )
    kwargs.update(overrides)
    torch.manual_seed(0)
    model = model_cls(cfg_cls(**kwargs)).eval()
    if family == "qwen2":  # HF initialises biases to zero; make them matter
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                torch.nn.init.normal_(proj.bias, std=0.2)
    model.save_pretrained(str(directory))
    tok.save_pretrained(str(directory))
    return directory
