"""Correctness checks of the GPU benchmark: logits against transformers through every attention path,
and greedy outputs that do not depend on how the engine schedules them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch

from benchmarks import gpu_models
from inference.block_manager import BlockManager
from inference.config import EngineConfig
from inference.engine import LLMEngine
from inference.model_runner import ScheduledBatch
from inference.protocol import SamplingParams
from inference.sequence import Sequence

# ||ours - hf|| / ||hf|| over all checked logits; bf16 rounds every layer's activations differently.
PARITY_TOLERANCE = {torch.float32: 1e-3, torch.bfloat16: 5e-2}
KV_CACHE_GB = 2.0  # of the checks' engines (the CPU test of these checks makes it small)


def engine_for(path: Path, dtype: torch.dtype, **overrides: Any) -> LLMEngine:
    kwargs: dict[str, Any] = dict(
        device=gpu_models.DEVICE,
        dtype=dtype,
        kv_cache_memory_gb=KV_CACHE_GB,
        max_model_len=2048,
        max_num_seqs=8,
    )
    kwargs.update(overrides)
    return LLMEngine(EngineConfig(model_path=path, **kwargs))


def _chunked_logits(engine: LLMEngine, ids: list[int], chunk: int) -> torch.Tensor:
    """Logits at every position, `chunk` tokens per eager step (as in the parity tests)."""
    seq = Sequence("parity", list(ids), len(ids), SamplingParams(), engine.max_model_len)
    assert engine.block_manager.allocate(seq, len(ids))
    runner, out = engine.runner, []
    while seq.num_computed_tokens < len(ids):
        n = min(chunk, len(ids) - seq.num_computed_tokens)
        input_ids, positions, meta = runner.prepare(ScheduledBatch([seq], [n], [True]))
        hidden = engine.model(input_ids, runner.rope.lookup(positions), runner.kv_caches, meta)
        out.append(engine.model.compute_logits(hidden))
        seq.num_computed_tokens += n
    engine.block_manager.free(seq)
    return torch.cat(out)


def _graph_decode_logits(engine: LLMEngine, prompts: list[list[int]], steps: int) -> list[torch.Tensor]:
    """Prefill all but the last `steps` tokens of each prompt, then decode them together (teacher
    forcing) through `runner.run`, i.e. the captured graphs: logits of each prompt's last `steps`."""
    seqs = [
        Sequence(f"g{i}", list(p), len(p), SamplingParams(), engine.max_model_len)
        for i, p in enumerate(prompts)
    ]
    for seq in seqs:
        assert engine.block_manager.allocate(seq, seq.num_tokens)
        n = seq.num_tokens - steps
        engine.runner.run(ScheduledBatch([seq], [n], [True]))
        seq.num_computed_tokens = n
    rows: list[list[torch.Tensor]] = [[] for _ in seqs]
    for _ in range(steps):
        logits = engine.runner.run(ScheduledBatch(seqs, [1] * len(seqs), [True] * len(seqs)))
        for i, seq in enumerate(seqs):
            # NOTE: clone: a graph's output buffer is overwritten by the next replay.
            rows[i].append(logits[i].clone())
            seq.num_computed_tokens += 1
    for seq in seqs:
        engine.block_manager.free(seq)
    return [torch.stack(r) for r in rows]


def parity(path: Path, hf_fp32: torch.nn.Module, dtype: torch.dtype) -> list[dict[str, Any]]:
    """Our logits against transformers' (same weights, same dtype) through each attention path."""
    hf = hf_fp32 if dtype == torch.float32 else copy.deepcopy(hf_fp32).to(dtype)
    engine = engine_for(path, dtype, enable_prefix_caching=False)
    g = torch.Generator().manual_seed(1)
    vocab = hf.config.vocab_size
    prompts = [torch.randint(3, vocab, (n,), generator=g).tolist() for n in (300, 157, 211)]
    with torch.inference_mode():
        ref = [hf(torch.tensor([p], device=gpu_models.DEVICE)).logits[0].float() for p in prompts]
        paths = {  # tokens per step -> the attention path they take
            "prefill (SDPA, causal)": 4096,
            "chunked prefill (SDPA over gathered prefix)": 64,
            "verify-size chunks (paged kernel, 5 queries)": 5,
            "decode, eager (paged kernel)": 1,
        }
        results = []
        for name, chunk in paths.items():
            ours = [_chunked_logits(engine, p, chunk) for p in prompts]
            results.append(_compare(name, dtype, ours, ref))
        steps = 24
        ours = _graph_decode_logits(engine, prompts, steps)
        results.append(
            _compare("decode, batch of 3 (CUDA graphs)", dtype, ours, [r[-steps:] for r in ref], engine)
        )
    engine.block_manager.check_all_free()
    del engine, hf
    torch.cuda.empty_cache()
    return results


def _compare(name: str, dtype: torch.dtype, ours: list[torch.Tensor], ref: list[torch.Tensor], engine=None):
    a, b = torch.cat(ours), torch.cat(ref)
    rel = float((a - b).norm() / b.norm())
    top1 = float((a.argmax(-1) == b.argmax(-1)).float().mean())
    # The graph path must really have run graphs (on CUDA; CPU dry runs replay nothing).
    on_cuda = engine is not None and engine.config.device.type == "cuda"
    graphs = engine.runner.graphs is not None if on_cuda else None
    return {
        "check": f"parity {str(dtype).removeprefix('torch.')}: {name}",
        "rel_error": rel,
        "top1_agreement": top1,
        "passed": rel <= PARITY_TOLERANCE[dtype] and (graphs is None or graphs),
    }


def _prompts(vocab: int) -> list[list[int]]:
    """Varied lengths, two with a shared 96-token prefix, and repeated spans for prompt lookup."""
    g = torch.Generator().manual_seed(2)
    shared = torch.randint(3, vocab, (96,), generator=g).tolist()
    prompts = [torch.randint(3, vocab, (n,), generator=g).tolist() for n in (40, 170, 333, 77, 250)]
    prompts += [shared + torch.randint(3, vocab, (n,), generator=g).tolist() for n in (20, 55)]
    span = torch.randint(3, vocab, (30,), generator=g).tolist()
    prompts.append(span * 4)
    return prompts


def equality(path: Path, dtype: torch.dtype, vocab: int) -> list[dict[str, Any]]:
    """Greedy outputs equal the plain run's under each scheduling feature, and no block leaks."""
    prompts = _prompts(vocab)
    params = SamplingParams(max_tokens=48, temperature=0.0, ignore_eos=True)

    def run(**overrides: Any) -> tuple[list, LLMEngine]:
        engine = engine_for(path, dtype, **overrides)
        outs = [tokens for tokens, _, _ in engine.generate(prompts, params)]
        return outs, engine

    base, _ = run(enable_prefix_caching=False, prefill_chunk_size=2048, max_num_batched_tokens=4096)
    variants = {
        "eager (no CUDA graphs)": (dict(enforce_eager=True, enable_prefix_caching=False), None),
        "chunked prefill (32-token chunks)": (
            dict(prefill_chunk_size=32, max_num_batched_tokens=64, enable_prefix_caching=False),
            None,
        ),
        "preemption (small KV pool)": (dict(num_kv_blocks=60), lambda e: e.scheduler.num_preemptions_total),
        "prefix hits (second pass)": (dict(), "again"),
        "prompt lookup (speculative)": (
            dict(speculative="prompt_lookup", prompt_lookup_min=1, spec_max_batch=64, spec_max_tokens=4096),
            lambda e: e.spec.num_drafts,
        ),
    }
    results = []
    label = str(dtype).removeprefix("torch.")
    for name, (overrides, counter) in variants.items():
        outs, engine = run(**overrides)
        detail: dict[str, Any] = {}
        if counter == "again":  # the same prompts again: their prefixes are in the cache now
            outs = [tokens for tokens, _, _ in engine.generate(prompts, params)]
            detail["prefix_cache_hits"] = engine.scheduler.prefix_cache_hits
            used = engine.scheduler.prefix_cache_hits > 0
        elif counter is not None:
            detail["count"] = counter(engine)
            used = detail["count"] > 0
        else:
            used = True
        if engine.spec is not None:
            detail["accepted"] = engine.spec.num_accepted
        leaks = _leaks(engine.block_manager)
        same = sum(o == b for o, b in zip(outs, base, strict=True))
        results.append(
            {
                "check": f"greedy equality {label}: {name}",
                "identical": f"{same}/{len(base)}",
                "leaked_blocks": leaks,
                **detail,
                "passed": same == len(base) and not leaks and used,
            }
        )
        del engine
        torch.cuda.empty_cache()
    return results


def _leaks(bm: BlockManager) -> int:
    return bm.num_blocks - bm.num_free_blocks


def attention_kernels(path: Path) -> list[str]:
    """Names of the attention kernels that ran in one mixed eager step (prefill chunk + decodes)."""
    engine = engine_for(path, torch.bfloat16, enforce_eager=True)
    params = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)
    prompts = _prompts(engine.vocab_size)
    for i, p in enumerate(prompts[:3]):
        engine.add_request(f"k{i}", p, params)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        while engine.has_unfinished():
            engine.step()
        torch.cuda.synchronize()
    keys = ("attention", "attn", "fmha", "flash", "sdpa", "softmax")
    names = {e.key for e in prof.key_averages() if any(k in e.key.lower() for k in keys)}
    return sorted(names)
