"""Paged attention: write this step's K/V into the block pool, then attend over each sequence's blocks.

One interface (`paged_attention`) with a portable path in plain torch that runs on any device. A fused
CUDA kernel (e.g. flash-attn's `flash_attn_with_kvcache`) can replace the body of `paged_attention`
for `q.device.type == "cuda"` without touching callers: it takes the same metadata.

Layout of one layer's cache: `[2, num_blocks, block_size, num_kv_heads, head_dim]` (K then V).
The batch is ordered decodes first (one query token each, attended in one batched call), then
prefill chunks (several query tokens, attended one sequence at a time).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F


@dataclass
class PrefillChunk:
    """One sequence's prefill chunk: query rows `[start, end)` of the batch at positions from `pos0`."""

    start: int
    end: int
    pos0: int  # tokens already in the cache before this chunk
    block_ids: torch.Tensor  # [num_blocks_of_seq] blocks covering pos0 + (end - start) tokens
    mask: torch.Tensor | None  # [q, context] causal mask when pos0 > 0; None means plain causal


@dataclass
class AttentionMetadata:
    slot_mapping: torch.Tensor  # [num_tokens] flat slot (block * block_size + offset) per token
    num_decodes: int  # the first `num_decodes` tokens are single-token queries of distinct sequences
    decode_block_tables: torch.Tensor | None  # [num_decodes, max_blocks]
    decode_mask: torch.Tensor | None  # [num_decodes, 1, 1, max_blocks * block_size]; None: no padding
    decode_context_len: int  # keys to keep in the decode gather (the max context of the decodes)
    prefills: list[PrefillChunk] = field(default_factory=list)


def build_chunk_mask(pos0: int, num_queries: int, device: torch.device) -> torch.Tensor:
    """Causal mask of a chunk whose first query sits at `pos0`: query i sees keys 0..pos0+i."""
    keys = torch.arange(pos0 + num_queries, device=device)
    queries = torch.arange(pos0, pos0 + num_queries, device=device)
    return keys[None, :] <= queries[:, None]


def write_kv(cache: torch.Tensor, k: torch.Tensor, v: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    _, _, _, kv_heads, head_dim = cache.shape
    cache[0].view(-1, kv_heads, head_dim).index_copy_(0, slot_mapping, k)
    cache[1].view(-1, kv_heads, head_dim).index_copy_(0, slot_mapping, v)


def _gather(cache: torch.Tensor, block_ids: torch.Tensor, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """K and V of the given blocks as `[..., kv_heads, length, head_dim]`."""
    _, _, _, kv_heads, head_dim = cache.shape
    lead = block_ids.shape[:-1]
    k = cache[0][block_ids].view(*lead, -1, kv_heads, head_dim)[..., :length, :, :]
    v = cache[1][block_ids].view(*lead, -1, kv_heads, head_dim)[..., :length, :, :]
    return k.transpose(-3, -2), v.transpose(-3, -2)


def paged_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: torch.Tensor, meta: AttentionMetadata
) -> torch.Tensor:
    """q: [tokens, heads, head_dim]; k, v: [tokens, kv_heads, head_dim]; returns [tokens, heads, head_dim]."""
    write_kv(cache, k, v, meta.slot_mapping)
    out = torch.empty_like(q)
    d = meta.num_decodes
    if d:
        keys, values = _gather(cache, meta.decode_block_tables, meta.decode_context_len)
        out[:d] = F.scaled_dot_product_attention(
            q[:d].unsqueeze(2), keys, values, attn_mask=meta.decode_mask, enable_gqa=True
        ).squeeze(2)
    for chunk in meta.prefills:
        qc = q[chunk.start : chunk.end].transpose(0, 1)
        if chunk.mask is None:  # first chunk: its own K/V are the whole context
            keys, values = k[chunk.start : chunk.end].transpose(0, 1), v[chunk.start : chunk.end].transpose(0, 1)
        else:
            keys, values = _gather(cache, chunk.block_ids, chunk.pos0 + chunk.end - chunk.start)
        out[chunk.start : chunk.end] = F.scaled_dot_product_attention(
            qc, keys, values, attn_mask=chunk.mask, is_causal=chunk.mask is None, enable_gqa=True
        ).transpose(0, 1)
    return out
