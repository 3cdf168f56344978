"""Paged attention: write this step's K/V into the block pool, then attend over each sequence's blocks.

One interface (`paged_attention`) with a portable path in plain torch that runs on any device. A fused
CUDA kernel (e.g. flash-attn's `flash_attn_with_kvcache`) can replace the body of `paged_attention`
for `q.device.type == "cuda"` without touching callers: it takes the same metadata.

Layout of one layer's cache: `[2, num_kv_heads, num_blocks, block_size, head_dim]` (K then V). Heads
outermost so a gather of whole blocks (`index_select`, much faster than advanced indexing on CPU)
yields per-head `[tokens, head_dim]` matrices that attention's matmuls read without another copy.
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
    _, kv_heads, _, _, head_dim = cache.shape
    cache[0].view(kv_heads, -1, head_dim).index_copy_(1, slot_mapping, k.transpose(0, 1))
    cache[1].view(kv_heads, -1, head_dim).index_copy_(1, slot_mapping, v.transpose(0, 1))


def _gather(cache: torch.Tensor, block_ids: torch.Tensor, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """K and V of the first `length` tokens in `block_ids` (`[blocks]` or `[seqs, blocks]`), as
    `[kv_heads, length, head_dim]` or `[seqs, kv_heads, length, head_dim]`."""
    _, kv_heads, _, block_size, head_dim = cache.shape
    lead = block_ids.shape[:-1]
    kv = cache.index_select(2, block_ids.flatten())
    kv = kv.view(2, kv_heads, *lead, block_ids.shape[-1] * block_size, head_dim)[..., :length, :]
    if lead:
        kv = kv.transpose(1, 2)
    return kv[0], kv[1]


def paged_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: torch.Tensor, meta: AttentionMetadata
) -> torch.Tensor:
    """q: [tokens, heads, head_dim]; k, v: [tokens, kv_heads, head_dim]; returns [tokens, heads, head_dim]."""
    write_kv(cache, k, v, meta.slot_mapping)
    d = meta.num_decodes
    # The common all-decode step returns SDPA's output as is; mixed steps assemble into `out`.
    out = torch.empty_like(q) if meta.prefills else None
    if d:
        keys, values = _gather(cache, meta.decode_block_tables, meta.decode_context_len)
        kv_heads, head_dim = keys.shape[1], q.shape[-1]
        # NOTE: the query heads sharing a KV head become that head's "query rows" (HF's repeat_kv maps
        # head h to KV head h // group), so GQA needs no repeated K/V; one mask row fits them all.
        grouped = q[:d].view(d, kv_heads, -1, head_dim)
        decoded = F.scaled_dot_product_attention(grouped, keys, values, attn_mask=meta.decode_mask)
        if out is None:
            return decoded.view(d, -1, head_dim)
        out[:d] = decoded.view(d, -1, head_dim)
    for chunk in meta.prefills:
        qc = q[chunk.start : chunk.end].transpose(0, 1)
        if chunk.mask is None:  # first chunk: its own K/V are the whole context
            keys, values = (
                k[chunk.start : chunk.end].transpose(0, 1),
                v[chunk.start : chunk.end].transpose(0, 1),
            )
        else:
            keys, values = _gather(cache, chunk.block_ids, chunk.pos0 + chunk.end - chunk.start)
        # NOTE: 4-d inputs: with 3-d ones and enable_gqa, CPU SDPA falls back to its math kernel, which
        # copies K/V per query head and cost 3-4x the flash kernel for verification-sized chunks.
        out[chunk.start : chunk.end] = F.scaled_dot_product_attention(
            qc[None],
            keys[None],
            values[None],
            attn_mask=chunk.mask,
            is_causal=chunk.mask is None,
            enable_gqa=True,
        )[0].transpose(0, 1)
    return out
