"""The paged attention paths (torch, our in-place CPU kernel, and Triton where installed) against attention
over plain K/V, and the decode graphs' static-buffer inputs against eager steps (CPU: the same buffers,
run without capture)."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from inference import attention, cpu_attention
from inference.attention import (
    AttentionMetadata,
    PagedBatch,
    PrefillChunk,
    _paged_torch,
    build_chunk_mask,
    paged_attention,
    select_backend,
)
from inference.model_runner import ModelRunner, num_paged
from inference.protocol import SamplingParams
from tests.inference.engine.conftest import assert_no_leaks


def _random_paged(num_blocks, block_size, contexts, heads, kv_heads, dim):
    """A random pool, one block table per sequence (shuffled blocks) and the queries' contexts."""
    g = torch.Generator().manual_seed(0)
    cache = torch.randn(2, kv_heads, num_blocks, block_size, dim, generator=g)
    perm = torch.randperm(num_blocks, generator=g)
    width = max(-(-max(c) // block_size) for c in contexts)
    tables = perm[: len(contexts) * width].view(len(contexts), width).to(torch.int32)
    token_seq = torch.tensor([i for i, c in enumerate(contexts) for _ in c])
    context = torch.tensor([n for c in contexts for n in c])
    q = torch.randn(len(context), heads, dim, generator=g)
    return cache, tables, token_seq, context, q


def _reference(cache, tables, token_seq, context, q) -> torch.Tensor:
    kv_heads, block_size = cache.shape[1], cache.shape[3]
    out = []
    for t in range(len(q)):
        n = int(context[t])
        blocks = tables[token_seq[t], : -(-n // block_size)].long()
        k = cache[0][:, blocks].flatten(1, 2)[:, :n]
        v = cache[1][:, blocks].flatten(1, 2)[:, :n]
        group = q.shape[1] // kv_heads
        k, v = k.repeat_interleave(group, 0), v.repeat_interleave(group, 0)
        out.append(F.scaled_dot_product_attention(q[t][:, None], k, v)[:, 0])
    return torch.stack(out)


# Decodes with ragged contexts, and verification-like chunks of several queries per sequence.
CASES = {
    "decodes": [[5], [33], [17], [1]],
    "uniform-decodes": [[40], [40]],
    "chunks": [[9, 10, 11], [30], [3, 4, 5, 6, 7, 8, 9, 10]],
}
# Contexts over several of the C kernel's tiles of 128 keys (its running softmax rescales across them).
LONG = [[300], [129, 130]]


def _paged_batch(contexts, tables, token_seq, context) -> PagedBatch:
    p = PagedBatch(len(token_seq), tables, token_seq, context, int(context.max()))
    n_q = max(len(c) for c in contexts)
    if n_q == 1:
        p.uniform = len(set(context.tolist())) == 1
        return p
    starts = [sum(len(c) for c in contexts[:i]) for i in range(len(contexts))]
    slots = [[s + min(j, len(c) - 1) for j in range(n_q)] for s, c in zip(starts, contexts, strict=True)]
    p.queries = torch.tensor(slots)
    p.out_index = torch.tensor([i * n_q + j for i, c in enumerate(contexts) for j in range(len(c))])
    return p


@pytest.mark.unit
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("heads", [(4, 2), (9, 3), (4, 4)], ids=["gqa2", "gqa3", "mha"])
def test_torch_paged_path_matches_plain_attention(case, heads):
    contexts = CASES[case]
    cache, tables, token_seq, context, q = _random_paged(40, 4, contexts, *heads, 16)
    ours = _paged_torch(q, cache, _paged_batch(contexts, tables, token_seq, context))
    torch.testing.assert_close(ours, _reference(cache, tables, token_seq, context, q), atol=1e-5, rtol=1e-5)


@pytest.mark.unit
@pytest.mark.parametrize("case", [*CASES, "long"])
@pytest.mark.parametrize("heads", [(4, 2), (9, 3), (4, 4), (14, 2)], ids=["gqa2", "gqa3", "mha", "gqa7"])
@pytest.mark.parametrize("threaded", [False, True], ids=["one-thread", "all-threads"])
@pytest.mark.parametrize("kv_dtype", [torch.float32, torch.bfloat16], ids=["fp32-cache", "bf16-cache"])
def test_cpu_kernel_reads_the_pool_in_place_as_plain_attention(
    tmp_path, monkeypatch, case, heads, threaded, kv_dtype
):
    """fp32 queries over an fp32 or bf16 pool (the engine's default for weights kept quantized), head
    dims of one and of several 64-lane spans (the kernel's register blocks)."""
    if threaded:  # these steps are small enough for one thread; large ones split (token, head) tasks
        monkeypatch.setattr(cpu_attention, "PARALLEL_MIN_MACS", 0)
    if not cpu_attention.load(tmp_path):
        pytest.skip("no C compiler: the in-place CPU kernel cannot be built here")
    contexts = (LONG if case == "long" else CASES[case]) + [[0]]  # context 0 (no keys): zeros
    for dim in (16, 80, 128):
        cache, tables, token_seq, context, q = _random_paged(256, 4, contexts, *heads, dim)
        cache = cache.to(kv_dtype)
        assert cpu_attention.serves(q, cache)
        ours = cpu_attention.paged_attention_cpu(q, cache, tables, token_seq, context, int(context.max()))
        want = _reference(cache.float(), tables, token_seq[:-1], context[:-1], q[:-1])
        torch.testing.assert_close(ours[:-1], want, atol=1e-5, rtol=1e-5)
        assert not ours[-1].any()


@pytest.mark.unit
@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed (GPU builds)")
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize(
    ("dtype", "tolerance"), [(torch.float32, 1e-5), (torch.float16, 2e-3), (torch.bfloat16, 1e-2)]
)
def test_triton_kernel_matches_plain_attention(case, dtype, tolerance):
    """On a GPU build; on CPU only under TRITON_INTERPRET=1 (Triton's interpreter, which cannot do bf16)."""
    from inference.attention_triton import paged_attention_triton

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype == torch.bfloat16 and device == "cpu":
        pytest.skip("Triton's interpreter computes garbage in bf16")
    contexts = CASES[case] + [[0]]  # context 0: a graph's padding row, which must come out as zeros
    cache, tables, token_seq, context, q = _random_paged(40, 16, contexts, 9, 3, 64)
    args = [q.to(dtype), cache.to(dtype), tables, token_seq, context]
    ours = paged_attention_triton(*(t.to(device) for t in args)).float().cpu()
    want = _reference(cache, tables, token_seq[:-1], context[:-1], q[:-1])
    assert float((ours[:-1] - want).norm() / want.norm()) < tolerance
    assert not ours[-1].any()


INTERPRETED_TRITON = pytest.param(
    "triton",
    marks=pytest.mark.skipif(
        importlib.util.find_spec("triton") is None or os.environ.get("TRITON_INTERPRET") != "1",
        reason="the Triton kernel on CPU tensors needs Triton and TRITON_INTERPRET=1",
    ),
)


@pytest.mark.unit
@pytest.mark.parametrize("backend", ["torch", INTERPRETED_TRITON])
def test_static_decode_buffers_give_the_eager_outputs(tiny_llama, make_engine, backend):
    """The decode graphs' input path (static buffers, padding to a bucket, scratch slot), run eagerly on
    CPU: greedy outputs equal plain eager steps, with chunked prefill, prefix hits and ragged batches."""
    prompts = [[5 + i] * (3 + 4 * i) + list(range(10, 20)) for i in range(6)]
    params = [SamplingParams(max_tokens=6 + 3 * i, temperature=0) for i in range(6)]
    plain = make_engine(tiny_llama, prefill_chunk_size=8).generate(prompts, params)
    engine = make_engine(tiny_llama, prefill_chunk_size=8)
    num_blocks, block_size = len(engine.block_manager.blocks), engine.runner.block_size
    engine.runner = ModelRunner(engine.model, num_blocks, block_size, engine.max_model_len, backend, 5)
    calls = []
    run = engine.runner.graphs.run
    engine.runner.graphs.run = lambda h: calls.append(len(h.counts)) or run(h)
    assert engine.generate(prompts, params) == plain
    assert engine.generate(prompts[:2], params[:2]) == plain[:2]  # prefix hits
    assert {3, 5} <= set(calls)  # 3 sequences run in bucket 4, with a padding row
    assert_no_leaks(engine)


@pytest.mark.unit
def test_cpu_engines_use_the_torch_backend_without_graphs(tiny_llama, make_engine):
    engine = make_engine(tiny_llama)
    assert engine.attention_backend == "torch" and engine.runner.graphs is None
    cache = engine.runner.kv_caches[0]
    q = torch.zeros(1, 4, cache.shape[-1])
    # fp32 CPU engines read the pool in place (head_dim 16 here), where a C compiler is found
    assert cpu_attention.serves(q, cache) == (cpu_attention.compiled(cpu_attention.SOURCE, None) is not None)
    with pytest.raises(ValueError, match="needs a CUDA device"):
        select_backend("triton", torch.device("cpu"), 64)


@pytest.mark.unit
@pytest.mark.parametrize("bf16_prefill", [False, True], ids=["fp32-attention", "bf16-attention"])
def test_prefill_chunks_over_a_bf16_cache(monkeypatch, bf16_prefill):
    """A first chunk (its own K/V) and a later one (its prefix read from the pool) of one sequence
    against attention over the pool's bf16 K/V; on CPUs with AMX they attend in bf16
    (`attention._bf16_prefill`), which stays within bf16 rounding of it."""
    monkeypatch.setattr(attention, "_bf16_prefill", lambda: bf16_prefill)
    heads, kv_heads, dim, block_size, first, later = 9, 3, 64, 16, 40, 24
    g = torch.Generator().manual_seed(0)
    cache = torch.zeros(2, kv_heads, 8, block_size, dim, dtype=torch.bfloat16)
    blocks = torch.tensor([5, 2, 7, 0], dtype=torch.int32)
    q, k, v = (torch.randn(first + later, n, dim, generator=g) for n in (heads, kv_heads, kv_heads))
    slots = (blocks.long()[:, None] * block_size + torch.arange(block_size)).flatten()
    out = torch.empty_like(q)
    for start, end in ((0, first), (first, first + later)):
        chunk = PrefillChunk(
            0,
            end - start,
            start,
            blocks,
            None if start == 0 else build_chunk_mask(start, end - start, q.device),
        )
        meta = AttentionMetadata(slots[start:end], prefills=[chunk])
        out[start:end] = paged_attention(q[start:end], k[start:end], v[start:end], cache, meta)
    kb, vb = (t.bfloat16().float().transpose(0, 1).repeat_interleave(heads // kv_heads, 0) for t in (k, v))
    want = F.scaled_dot_product_attention(q.transpose(0, 1), kb, vb, is_causal=True).transpose(0, 1)
    # in fp32 the first chunk attends its K/V unrounded, the later one exactly the pool's
    assert (out - want).abs().max().item() < 3e-2
    later_error = (out[first:] - want[first:]).abs().max().item()
    assert later_error > 1e-5 if bf16_prefill else later_error < 1e-5


@pytest.mark.unit
def test_short_chunks_over_short_contexts_take_the_paged_path():
    """Sequences ordered by chunk length: the paged group is the leading run of chunks up to 16 tokens
    or short ones ending within a short context (a burst of chat prompts); the first other ends it."""
    counts, ends = np.array([1, 1, 24, 24, 40, 300]), np.array([50, 900, 60, 70, 800, 300])
    assert num_paged(counts, ends) == 4
    assert num_paged(np.array([16, 17]), np.array([2000, 2000])) == 1
    assert num_paged(np.array([20, 30]), np.array([40, 50])) == 2
    assert num_paged(np.array([], dtype=np.int64), np.array([], dtype=np.int64)) == 0
