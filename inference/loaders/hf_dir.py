"""HF checkpoint directories: `config.json`, `model.safetensors[.index.json]`, tokenizer files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors import safe_open
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from inference.config import ModelConfig


def read_model_config(directory: Path) -> ModelConfig:
    cfg = json.loads((directory / "config.json").read_text())
    extra_eos: list[int] = []
    generation = directory / "generation_config.json"
    if generation.exists():
        eos = json.loads(generation.read_text()).get("eos_token_id")
        extra_eos = [eos] if isinstance(eos, int) else list(eos or [])
    return ModelConfig.from_hf_dict(cfg, extra_eos)


def weight_files(directory: Path) -> list[Path]:
    index = directory / "model.safetensors.index.json"
    if index.exists():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        return [directory / s for s in shards]
    single = directory / "model.safetensors"
    if single.exists():
        return [single]
    raise FileNotFoundError(f"no model.safetensors[.index.json] in {directory}")


def iter_weights(directory: Path) -> Iterator[tuple[str, torch.Tensor]]:
    for path in weight_files(directory):
        with safe_open(str(path), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 - safe_open handles are not iterable
                yield name, f.get_tensor(name)


def load_tokenizer(directory: Path) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(str(directory))
