"""Perplexity of our engine's model on a fixed text, GGUF weights kept quantized vs dequantised to
fp32 (`benchmarks/engine.py --perplexity`). Issue 15's bar: quantized within 1% of dequantised.

The text (this repository's README, first `tokens` tokens, windows of `window`) is fed through the
engine's own `ModelRunner`: each window is one sequence whose first token is its prompt and the rest
its "proposals", so one prefill returns the logits of every position (the speculative-verification
path), and the next-token log-likelihoods give the perplexity.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from rich.console import Console

from inference.loaders import load_model
from inference.model_runner import ModelRunner, ScheduledBatch
from inference.protocol import SamplingParams
from inference.sequence import Sequence

RESULTS = Path(__file__).parent / "results" / "engine_perplexity.json"
TEXT = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = 16


def _window_nll(runner: ModelRunner, ids: list[int]) -> float:
    """Summed negative log-likelihood of ids[1:] given the tokens before each."""
    seq = Sequence("ppl", ids[:1], 1, SamplingParams(max_tokens=1), max_len=len(ids) + 1)
    seq.spec_token_ids = ids[1:]
    seq.block_table = list(range(-(-len(ids) // BLOCK)))
    logits = runner.run(ScheduledBatch([seq], [len(ids)], [True]))  # [len(ids), vocab]
    logprobs = torch.log_softmax(logits[:-1].float(), dim=-1)
    return -float(logprobs.gather(1, torch.tensor(ids[1:]).unsqueeze(1)).sum())


def perplexity(gguf: Path, cache_dir: Path, quantized: bool, ids: list[int], window: int) -> float:
    model, _ = load_model(gguf, cache_dir, torch.device("cpu"), torch.float32, quantized)
    blocks = -(-window // BLOCK) + 1
    runner = ModelRunner(model, num_blocks=blocks, block_size=BLOCK, max_model_len=window + 1)
    nll, count = 0.0, 0
    with torch.inference_mode():
        for start in range(0, len(ids) - 1, window):
            chunk = ids[start : start + window]
            if len(chunk) > 1:
                nll += _window_nll(runner, chunk)
                count += len(chunk) - 1
    return math.exp(nll / count)


def run(gguf: Path, cache_dir: Path, quick: bool, out: Path) -> None:
    console = Console()
    tokens, window = (256, 128) if quick else (4096, 512)
    _, tokenizer = load_model(gguf, cache_dir, torch.device("cpu"), torch.float32, False)
    ids = tokenizer.encode(TEXT.read_text(), add_special_tokens=False)[:tokens]
    result = {"gguf": gguf.name, "text": TEXT.name, "tokens": len(ids), "window": window}
    for name, quantized in (("dequantised_fp32", False), ("quantized", True)):
        result[name] = perplexity(gguf, cache_dir, quantized, ids, window)
        console.print(f"{name}: perplexity {result[name]:.4f}")
    result["relative_difference"] = result["quantized"] / result["dequantised_fp32"] - 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    console.print(
        f"quantized vs dequantised: {result['relative_difference']:+.2%} (target within 1%); written to {out}"
    )
