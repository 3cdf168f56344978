"""Paged attention in Triton: each query token reads its keys and values straight from the block pool.

One program per (query token, KV head). It loads the query heads that share the KV head (GQA) as one
tile, walks the token's context `BLOCK_N` keys at a time through its sequence's block table, and keeps
an online softmax in fp32. A decode is one query token; a verification chunk (the last token plus
its guesses) is several, each with its own context length, so every short chunk of a step is
attended in one launch. Shapes depend only on the number of query tokens, so decode steps can be
captured in CUDA graphs (padding tokens have context 0 and write zeros).

Imported only where Triton is installed (a CUDA build of torch brings it); `attention.py` falls
back to plain torch elsewhere.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _paged_attention_kernel(
    q_ptr,  # [tokens, heads, head_dim]
    cache_ptr,  # [2, kv_heads, num_blocks, block_size, head_dim]
    out_ptr,  # [tokens, heads, head_dim]
    block_tables_ptr,  # [seqs, max_blocks]
    token_seq_ptr,  # [tokens] row of block_tables
    context_lens_ptr,  # [tokens] keys the token attends (its position + 1); 0 for padding
    scale,
    stride_qt,
    stride_qh,
    stride_ot,
    stride_oh,
    stride_ckv,
    stride_ch,
    stride_cb,
    stride_cs,
    stride_bt,
    GROUP: tl.constexpr,
    GROUP_PAD: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    BLOCK_N: tl.constexpr,
    FP32: tl.constexpr,
):
    token = tl.program_id(0)
    kv_head = tl.program_id(1).to(tl.int64)  # NOTE: head * stride can pass 2**31 in a large pool
    seq = tl.load(token_seq_ptr + token)
    context = tl.load(context_lens_ptr + token)

    offs_g = tl.arange(0, GROUP_PAD)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    heads = kv_head * GROUP + offs_g
    q_mask = offs_g[:, None] < GROUP
    q_offs = token * stride_qt + heads[:, None] * stride_qh + offs_d[None, :]
    q = tl.load(q_ptr + q_offs, mask=q_mask, other=0.0)

    m_i = tl.full([GROUP_PAD], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_DIM], dtype=tl.float32)
    k_base = cache_ptr + kv_head * stride_ch
    v_base = k_base + stride_ckv
    qk_scale = scale * 1.4426950408889634  # exp2 instead of exp
    for start in range(0, context, BLOCK_N):
        pos = start + offs_n
        valid = pos < context
        blocks = tl.load(block_tables_ptr + seq * stride_bt + pos // BLOCK_SIZE, mask=valid, other=0)
        kv_offs = blocks[:, None].to(tl.int64) * stride_cb + (pos % BLOCK_SIZE)[:, None] * stride_cs
        kv_offs = kv_offs + offs_d[None, :]
        k = tl.load(k_base + kv_offs, mask=valid[:, None], other=0.0)
        # NOTE: fp32 inputs would run as tf32 on the tensor cores (~3e-4 relative error): ieee keeps fp32.
        s = tl.dot(q, tl.trans(k), input_precision="ieee") if FP32 else tl.dot(q, tl.trans(k))
        s = tl.where(valid[None, :], s * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + kv_offs, mask=valid[:, None], other=0.0)
        pv = tl.dot(p, v, input_precision="ieee") if FP32 else tl.dot(p.to(v.dtype), v)
        acc = acc * alpha[:, None] + pv
        m_i = m_new
    out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    o_offs = token * stride_ot + heads[:, None] * stride_oh + offs_d[None, :]
    tl.store(out_ptr + o_offs, out.to(out_ptr.dtype.element_ty), mask=q_mask)


def paged_attention_triton(
    q: torch.Tensor,
    cache: torch.Tensor,
    block_tables: torch.Tensor,
    token_seq: torch.Tensor,
    context_lens: torch.Tensor,
) -> torch.Tensor:
    """q: `[tokens, heads, head_dim]` (unit stride in head_dim); returns `[tokens, heads, head_dim]`."""
    tokens, heads, head_dim = q.shape
    _, kv_heads, _, block_size, _ = cache.shape
    group = heads // kv_heads
    out = torch.empty((tokens, heads, head_dim), device=q.device, dtype=q.dtype)
    if q.stride(-1) != 1:
        q = q.contiguous()
    _paged_attention_kernel[(tokens, kv_heads)](
        q,
        cache,
        out,
        block_tables,
        token_seq,
        context_lens,
        head_dim**-0.5,
        q.stride(0),
        q.stride(1),
        out.stride(0),
        out.stride(1),
        cache.stride(0),
        cache.stride(1),
        cache.stride(2),
        cache.stride(3),
        block_tables.stride(0),
        GROUP=group,
        # tl.dot needs at least 16 rows: the group's heads are padded up (masked loads and stores).
        GROUP_PAD=max(16, triton.next_power_of_2(group)),
        HEAD_DIM=head_dim,
        BLOCK_SIZE=block_size,
        BLOCK_N=64,
        FP32=q.dtype == torch.float32,
        num_warps=4,
    )
    return out
