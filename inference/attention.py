"""Paged attention: write this step's K/V into the block pool, then attend over each sequence's blocks.

Layout of one layer's cache: `[2, num_kv_heads, num_blocks, block_size, head_dim]` (K then V). Heads
outermost so a gather of whole blocks (`index_select`, much faster than advanced indexing on CPU)
yields per-head `[tokens, head_dim]` matrices that attention's matmuls read without another copy.

A step's tokens come in two groups (the scheduler orders sequences by chunk length):
- **paged** (`PagedBatch`): decodes and short chunks (speculative verification: the last token plus
  its guesses), all attended in one call. Backend `triton` (CUDA) reads keys and values in place
  from the pool (`attention_triton.py`; shapes depend only on the token count, so decode steps are
  captured in CUDA graphs); backend `torch` reads them in place too on fp32 CPU engines, through our C
  kernel (`cpu_attention.py`), and elsewhere (CUDA without Triton, no C compiler) gathers the blocks of
  all these sequences once and runs one batched SDPA.
- **prefill chunks** (`PrefillChunk`): longer chunks, one SDPA call each (compute-bound); a first
  chunk attends its own K/V with `is_causal`, a later one gathers its cached prefix.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from inference import cpu_attention
from inference.quant.kernel import has_amx

log = logging.getLogger(__name__)

PAGED_MAX_QUERIES = 16  # chunks of up to this many tokens take the paged path...
# ...and so do chunks of up to PAGED_SHORT_QUERIES tokens ending within PAGED_SHORT_CONTEXT keys: the
# prompts of a burst of chats. NOTE: one SDPA call per chunk per layer is dispatch-bound there (~55 us
# each): 31 chat prompts of 24 new tokens spent about 150 ms of a 330 ms prefill step attending one
# chunk at a time (SmolLM2, 2 cores), where the paged path attends them all in one call.
PAGED_SHORT_QUERIES, PAGED_SHORT_CONTEXT = 64, 256
BACKENDS = ("auto", "triton", "torch")


@dataclass
class PrefillChunk:
    """One sequence's prefill chunk: query rows `[start, end)` of the batch at positions from `pos0`."""

    start: int
    end: int
    pos0: int  # tokens already in the cache before this chunk
    block_ids: torch.Tensor  # [num_blocks_of_seq] blocks covering pos0 + (end - start) tokens
    mask: torch.Tensor | None  # [q, context] causal mask when pos0 > 0; None means plain causal
    _biases: dict[torch.dtype, torch.Tensor] = field(default_factory=dict, repr=False)

    def bias(self, dtype: torch.dtype) -> torch.Tensor | None:
        """`mask` as an additive bias in `dtype` (0 or -inf), made once for all layers: SDPA turns a
        boolean mask into one on every call (10% of a 512-query chunk's attention after a prefix)."""
        if self.mask is None:
            return None
        if dtype not in self._biases:
            zeros = torch.zeros(self.mask.shape, dtype=dtype, device=self.mask.device)
            self._biases[dtype] = zeros.masked_fill_(~self.mask, float("-inf"))
        return self._biases[dtype]


@dataclass
class PagedBatch:
    """The first `num_tokens` query tokens of the step, of sequences `0..S-1` in order, each attending
    the first `context_lens[t]` keys of its sequence (its position + 1; 0 for graph padding)."""

    num_tokens: int
    block_tables: torch.Tensor  # [S, max_blocks] int32
    token_seq: torch.Tensor  # [P] row of block_tables of each token
    context_lens: torch.Tensor  # [P]
    # Only the torch backend reads these (host-side shapes):
    max_context: int = 0  # longest context: keys to gather
    uniform: bool = False  # one query per sequence and every context equal: no mask needed
    queries: torch.Tensor | None = None  # [S, max queries] token of each query slot; None: one each
    out_index: torch.Tensor | None = None  # [P] slot of each token in the flattened [S * max queries]


@dataclass
class AttentionMetadata:
    slot_mapping: torch.Tensor  # [num_tokens] flat slot (block * block_size + offset) per token
    paged: PagedBatch | None = None
    prefills: list[PrefillChunk] = field(default_factory=list)
    backend: str = "torch"


def select_backend(requested: str, device: torch.device, head_dim: int) -> str:
    """`triton` where it can run (CUDA, Triton importable, power-of-two head_dim), else `torch`."""
    if requested not in BACKENDS:
        raise ValueError(f"attention backend must be one of {BACKENDS}, got {requested!r}")
    if requested == "torch" or device.type != "cuda":
        if requested == "triton":
            raise ValueError("the triton attention backend needs a CUDA device")
        return "torch"
    try:
        import inference.attention_triton  # noqa: F401
    except ImportError as e:
        if requested == "triton":
            raise ValueError(f"the triton attention backend is unavailable: {e}") from e
        log.warning("Triton is not installed: paged attention falls back to torch (gather + SDPA)")
        return "torch"
    if head_dim & (head_dim - 1):
        if requested == "triton":
            raise ValueError(f"the triton attention backend needs a power-of-two head_dim, not {head_dim}")
        return "torch"
    return "triton"


def _bf16_prefill() -> bool:
    """Whether prefill chunks over a bf16 cache attend in bf16 (see `paged_attention`): only with AMX.
    NOTE: measured on Qwen 0.5B RAG prefills, 2 cores: 2.3-2.7x the fp32 kernel with AMX, but 0-7% slower
    with AVX-512 BF16 alone (Zen 4), and emulated bf16 is slower still."""
    return has_amx()


def build_chunk_mask(pos0: int, num_queries: int, device: torch.device) -> torch.Tensor:
    """Causal mask of a chunk whose first query sits at `pos0`: query i sees keys 0..pos0+i."""
    keys = torch.arange(pos0 + num_queries, device=device)
    queries = torch.arange(pos0, pos0 + num_queries, device=device)
    return keys[None, :] <= queries[:, None]


def write_kv(cache: torch.Tensor, k: torch.Tensor, v: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """This step's K/V into their slots, in the cache's dtype (which may be narrower than the model's)."""
    _, kv_heads, _, _, head_dim = cache.shape
    cache[0].view(kv_heads, -1, head_dim).index_copy_(1, slot_mapping, k.transpose(0, 1).to(cache.dtype))
    cache[1].view(kv_heads, -1, head_dim).index_copy_(1, slot_mapping, v.transpose(0, 1).to(cache.dtype))


def _gather(
    cache: torch.Tensor, block_ids: torch.Tensor, length: int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """K and V of the first `length` tokens in `block_ids` (`[blocks]` or `[seqs, blocks]`), as
    `[kv_heads, length, head_dim]` or `[seqs, kv_heads, length, head_dim]`, in `dtype` (the queries')."""
    _, kv_heads, _, block_size, head_dim = cache.shape
    block_ids = block_ids[..., : -(-length // block_size)]
    lead = block_ids.shape[:-1]
    kv = cache.index_select(2, block_ids.flatten()).to(dtype)
    kv = kv.view(2, kv_heads, *lead, block_ids.shape[-1] * block_size, head_dim)[..., :length, :]
    if lead:
        kv = kv.transpose(1, 2)
    return kv[0], kv[1]


def _paged_torch(q: torch.Tensor, cache: torch.Tensor, p: PagedBatch) -> torch.Tensor:
    """The paged group with one batched SDPA over the gathered blocks of its sequences."""
    keys, values = _gather(cache, p.block_tables, p.max_context, q.dtype)  # [S, kv_heads, L, head_dim]
    seqs, kv_heads, length, head_dim = keys.shape
    heads = q.shape[1]
    group = heads // kv_heads
    if p.queries is None:  # decodes: one query each
        qs, context = q.reshape(seqs, 1, heads, head_dim), p.context_lens[:, None]
    else:
        qs, context = q[p.queries], p.context_lens[p.queries]
    n_q = qs.shape[1]
    # NOTE: the query heads sharing a KV head become that head's "query rows" (HF's repeat_kv maps
    # head h to KV head h // group), so GQA needs no repeated K/V; every row of a token shares its mask.
    grouped = qs.reshape(seqs, n_q, kv_heads, group, head_dim).transpose(1, 2)
    grouped = grouped.reshape(seqs, kv_heads, n_q * group, head_dim)
    mask = None
    if not p.uniform:
        visible = torch.arange(length, device=q.device)[None, None, :] < context[:, :, None]
        mask = visible.repeat_interleave(group, dim=1)[:, None]  # [S, 1, n_q * group, L]
    out = F.scaled_dot_product_attention(grouped, keys, values, attn_mask=mask)
    out = out.reshape(seqs, kv_heads, n_q, group, head_dim).transpose(1, 2).reshape(-1, heads, head_dim)
    return out if p.out_index is None else out[p.out_index]


def _attend_paged(q: torch.Tensor, cache: torch.Tensor, p: PagedBatch, backend: str) -> torch.Tensor:
    if backend == "triton":
        from inference.attention_triton import paged_attention_triton

        return paged_attention_triton(q, cache, p.block_tables, p.token_seq, p.context_lens)
    if cpu_attention.serves(q, cache):
        return cpu_attention.paged_attention_cpu(
            q, cache, p.block_tables, p.token_seq, p.context_lens, p.max_context
        )
    return _paged_torch(q, cache, p)


def paged_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: torch.Tensor, meta: AttentionMetadata
) -> torch.Tensor:
    """q: [tokens, heads, head_dim]; k, v: [tokens, kv_heads, head_dim]; returns [tokens, heads, head_dim]."""
    write_kv(cache, k, v, meta.slot_mapping)
    p = meta.paged
    if not meta.prefills:  # the common all-decode step returns the paged output as is
        return _attend_paged(q, cache, p, meta.backend)
    out = q.new_empty(q.shape)
    if p is not None:
        out[: p.num_tokens] = _attend_paged(q[: p.num_tokens], cache, p, meta.backend)
    # NOTE: over a bf16 cache on CPU, prefill chunks attend in bf16: their K/V are already bf16 values
    # (a later chunk reads them from the cache; a first chunk's are rounded as the cache stores them),
    # and the flash kernel multiplies bf16 with the CPU's matrix units (AMX, AVX-512 BF16), summing in
    # fp32: 2.3-2.7x faster than fp32 for 512-query chunks (SmolLM2's heads, AMX).
    bf16 = cache.dtype == torch.bfloat16 and q.device.type == "cpu" and _bf16_prefill()
    dtype = torch.bfloat16 if bf16 else q.dtype
    for chunk in meta.prefills:
        qc = q[chunk.start : chunk.end].transpose(0, 1).to(dtype)
        if chunk.mask is None:  # first chunk: its own K/V are the whole context
            keys, values = (
                k[chunk.start : chunk.end].transpose(0, 1).to(dtype),
                v[chunk.start : chunk.end].transpose(0, 1).to(dtype),
            )
        else:
            keys, values = _gather(cache, chunk.block_ids, chunk.pos0 + chunk.end - chunk.start, dtype)
        # NOTE: 4-d inputs: with 3-d ones and enable_gqa, CPU SDPA falls back to its math kernel, which
        # copies K/V per query head and cost 3-4x the flash kernel for chunks with a cached prefix.
        out[chunk.start : chunk.end] = F.scaled_dot_product_attention(
            qc[None],
            keys[None],
            values[None],
            attn_mask=chunk.bias(dtype),
            is_causal=chunk.mask is None,
            enable_gqa=True,
        )[0].transpose(0, 1)
    return out
