"""Paged attention on CPU in our C kernel (`cpu_attention.c`), reading K/V in place from the block pool.

The torch path gathers every sequence's blocks into fresh tensors for each layer and step, then runs
SDPA: at batch 1 that gather and SDPA's dispatch cost more per layer than the attention itself, and a
1,500-token context copies ~2 MB per layer per token. The kernel reads the blocks where they lie (fp32
or bf16, see `kv_cache_dtype`), one OpenMP task per (token, KV head). It serves the paged group
(decodes and short chunks) of fp32 CPU engines; prefill chunks keep SDPA (compute-bound, well served by
its batched matmuls).
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import torch

from inference.quant.kernel import compiled

SOURCE = Path(__file__).with_name("cpu_attention.c")
LANES = 16  # head_dim must be a multiple of this (the kernel's dot-product lanes)
KV_DTYPES = (torch.float32, torch.bfloat16)  # the caches it reads (queries and outputs are fp32)
# Smaller steps run on one thread: waking a sleeping OpenMP worker costs more than it saves there (see
# PARALLEL_MIN_BYTES in inference/quant/kernel.py).
PARALLEL_MIN_MACS = 1 << 20

_LIB: ctypes.CDLL | None = None  # loaded once per process by `load` (CPU engines)


def load(cache_dir: Path | None) -> bool:
    """Build and load the kernel; False where it cannot be built (the torch path then serves)."""
    global _LIB
    lib = compiled(SOURCE, cache_dir)
    if lib is not None:
        p, i64, i32, f32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_float
        lib.paged_attention.argtypes = [p, p, i32, i64, i64, i64, i64, i64, i64, p, i64, p, p, f32, p, i32]
        _LIB = lib
    return lib is not None


def serves(q: torch.Tensor, cache: torch.Tensor) -> bool:
    return (
        _LIB is not None
        and q.device.type == "cpu"
        and q.dtype == torch.float32
        and cache.dtype in KV_DTYPES
        and q.shape[-1] % LANES == 0
        and cache.is_contiguous()
    )


def paged_attention_cpu(
    q: torch.Tensor,
    cache: torch.Tensor,
    block_tables: torch.Tensor,
    token_seq: torch.Tensor,
    context: torch.Tensor,
    max_context: int,
) -> torch.Tensor:
    """q `[T, heads, head_dim]`; token t attends the first `context[t]` (at most `max_context`) keys of
    sequence `token_seq[t]`."""
    q = q.contiguous()
    tokens, heads, dim = q.shape
    _, kv_heads, num_blocks, block_size, _ = cache.shape
    tables = block_tables.to(torch.int32).contiguous()
    seq, ctx = token_seq.to(torch.int64).contiguous(), context.to(torch.int64).contiguous()
    out = torch.empty_like(q)
    _LIB.paged_attention(
        q.data_ptr(), cache.data_ptr(), int(cache.dtype == torch.bfloat16), tokens, heads, kv_heads, dim,
        num_blocks, block_size,
        tables.data_ptr(), tables.shape[1], seq.data_ptr(), ctx.data_ptr(), dim**-0.5, out.data_ptr(),
        1 if tokens * heads * max_context * dim < PARALLEL_MIN_MACS else torch.get_num_threads(),
    )  # fmt: skip
    return out
