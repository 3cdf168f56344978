"""Turn a scheduled batch into tensors, run the model once, return the logits of sequences that sample.

Inputs are built on the host with numpy (vectorised over the step's tokens) and reach the device in
one copy; a pure decode step on CUDA instead fills the static buffers of a captured graph
(`cuda_graphs.py`) and replays it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from inference.attention import (
    PAGED_MAX_QUERIES,
    PAGED_SHORT_CONTEXT,
    PAGED_SHORT_QUERIES,
    AttentionMetadata,
    PagedBatch,
    PrefillChunk,
    build_chunk_mask,
)
from inference.config import ModelConfig
from inference.models.llama import LlamaForCausalLM
from inference.models.rope import RotaryEmbedding
from inference.sequence import Sequence

log = logging.getLogger(__name__)


@dataclass
class ScheduledBatch:
    """What one engine step computes, sequences ordered by chunk length (decodes first).

    `sampling[i]` is true when `seqs[i]` reaches its last known token this step, so a new token is
    sampled for it; a partial prefill chunk only fills the cache.
    """

    seqs: list[Sequence]
    num_new_tokens: list[int]
    sampling: list[bool]

    @property
    def num_tokens(self) -> int:
        return sum(self.num_new_tokens)


@dataclass
class HostInputs:
    """One step's inputs on the host; `seq_of_token` maps each flat token to its batch row."""

    input_ids: np.ndarray  # [T] int64
    positions: np.ndarray  # [T] int64
    slot_mapping: np.ndarray  # [T] int64
    block_tables: np.ndarray  # [S, max_blocks] int32
    seq_of_token: np.ndarray  # [T] int64
    starts: np.ndarray  # [S] first flat token of each sequence
    counts: np.ndarray  # [S] tokens of each sequence
    logit_rows: np.ndarray  # flat tokens whose logits are returned
    num_paged_seqs: int  # the first sequences, whose chunks take the paged path (`num_paged`)

    @property
    def is_decode(self) -> bool:
        """Every sequence feeds one token and samples (a captured graph can run it)."""
        return bool(len(self.counts) == self.num_paged_seqs and (self.counts == 1).all()) and len(
            self.logit_rows
        ) == len(self.counts)


def kv_block_bytes(cfg: ModelConfig, block_size: int, dtype: torch.dtype) -> int:
    """Bytes of one block across all layers (K and V)."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    return 2 * cfg.num_layers * block_size * cfg.num_kv_heads * cfg.head_dim * itemsize


def host_inputs(batch: ScheduledBatch, block_size: int) -> HostInputs:
    seqs = batch.seqs
    counts = np.array(batch.num_new_tokens, dtype=np.int64)
    computed = np.array([s.num_computed_tokens for s in seqs], dtype=np.int64)
    ends = np.cumsum(counts)
    starts = ends - counts
    seq_of_token = np.repeat(np.arange(len(seqs)), counts)
    positions = computed[seq_of_token] + np.arange(int(ends[-1])) - starts[seq_of_token]
    input_ids = np.empty(int(ends[-1]), dtype=np.int64)
    tables = np.zeros((len(seqs), max(len(s.block_table) for s in seqs)), dtype=np.int32)
    rows: list[int] = []
    for i, seq in enumerate(seqs):
        pos0, n, at = seq.num_computed_tokens, int(counts[i]), int(starts[i])
        fed = seq.token_ids[pos0 : pos0 + n]
        if len(fed) < n:  # a decode followed by its speculative proposals
            fed = fed + seq.spec_token_ids[: n - len(fed)]
        input_ids[at : at + n] = fed
        tables[i, : len(seq.block_table)] = seq.block_table
        if batch.sampling[i]:
            rows.extend(range(at + n - 1 - len(seq.spec_token_ids), at + n))
    blocks = tables[seq_of_token, positions // block_size].astype(np.int64)
    slots = blocks * block_size + positions % block_size
    return HostInputs(
        input_ids,
        positions,
        slots,
        tables,
        seq_of_token,
        starts,
        counts,
        np.array(rows, dtype=np.int64),
        num_paged(counts, positions[starts + counts - 1] + 1),
    )


def num_paged(counts: np.ndarray, ends: np.ndarray) -> int:
    """How many of the first sequences (ordered by chunk length) take the paged path: chunks of at most
    PAGED_MAX_QUERIES tokens, or short ones over short contexts (see attention.py)."""
    short = (counts <= PAGED_SHORT_QUERIES) & (ends <= PAGED_SHORT_CONTEXT)
    paged = (counts <= PAGED_MAX_QUERIES) | short
    return len(paged) if paged.all() else int(np.argmin(paged))


class ModelRunner:
    def __init__(
        self,
        model: LlamaForCausalLM,
        num_blocks: int,
        block_size: int,
        max_model_len: int,
        backend: str = "torch",
        max_graph_batch: int = 0,
        kv_dtype: torch.dtype | None = None,
    ) -> None:
        """`max_graph_batch` > 0 captures decode steps of up to that many sequences in CUDA graphs;
        `kv_dtype` is the KV cache's (None: the model's)."""
        cfg = model.config
        param = next(model.parameters())
        self.model, self.device, self.block_size, self.backend = model, param.device, block_size, backend
        # NOTE: zeros, not empty: padded decode gathers read unused slots, and masked-out garbage NaNs
        # would still poison the attention output (0 * NaN = NaN). One block more than the pool: the
        # padding rows of a captured decode graph write their K/V there (see cuda_graphs.py).
        shape = (2, cfg.num_kv_heads, num_blocks + 1, block_size, cfg.head_dim)  # see attention.py
        dtype = kv_dtype or param.dtype
        self.kv_caches = [torch.zeros(shape, device=self.device, dtype=dtype) for _ in range(cfg.num_layers)]
        self.rope = RotaryEmbedding(
            cfg.head_dim, max_model_len, cfg.rope_theta, cfg.rope_scaling, self.device, param.dtype
        )
        self.graphs = None
        if max_graph_batch > 0:
            from inference.cuda_graphs import DecodeGraphs

            self.graphs = DecodeGraphs(self, max_graph_batch, -(-max_model_len // block_size), num_blocks)

    def _to_device(self, *arrays: np.ndarray) -> list[torch.Tensor]:
        """One host-to-device copy for all of a step's index arrays (int64)."""
        flat = torch.from_numpy(np.concatenate(arrays))
        if self.device.type == "cuda":
            flat = flat.pin_memory().to(self.device, non_blocking=True)
        return list(flat.split([len(a) for a in arrays]))

    def prepare(self, batch: ScheduledBatch) -> tuple[torch.Tensor, torch.Tensor, AttentionMetadata]:
        """Input ids, positions and attention metadata of the flattened batch (eager steps)."""
        return self._prepare(host_inputs(batch, self.block_size))[:3]

    def _prepare(self, h: HostInputs) -> tuple[torch.Tensor, torch.Tensor, AttentionMetadata, torch.Tensor]:
        s_p = h.num_paged_seqs
        p_tokens = int(h.counts[:s_p].sum())
        max_q = int(h.counts[:s_p].max()) if s_p else 0
        extra: list[np.ndarray] = []
        if max_q > 1 and self.backend == "torch":  # padded query layout of the batched SDPA
            slot = np.arange(p_tokens) - h.starts[h.seq_of_token[:p_tokens]]
            queries = h.starts[:s_p, None] + np.minimum(np.arange(max_q)[None, :], h.counts[:s_p, None] - 1)
            extra = [queries.ravel(), h.seq_of_token[:p_tokens] * max_q + slot]
        ids, pos, slots, token_seq, rows, *extra_t = self._to_device(
            h.input_ids, h.positions, h.slot_mapping, h.seq_of_token[:p_tokens], h.logit_rows, *extra
        )
        tables = torch.from_numpy(h.block_tables).to(self.device, non_blocking=True)
        meta = AttentionMetadata(slots, backend=self.backend)
        if s_p:
            context = pos[:p_tokens] + 1
            max_context = int(h.positions[:p_tokens].max()) + 1
            meta.paged = PagedBatch(p_tokens, tables[:s_p], token_seq, context, max_context)
            if extra_t:
                meta.paged.queries = extra_t[0].view(s_p, max_q)
                meta.paged.out_index = extra_t[1]
            else:
                meta.paged.uniform = max_q == 1 and int(h.positions[:p_tokens].min()) + 1 == max_context
        for i in range(s_p, len(h.counts)):
            start, n = int(h.starts[i]), int(h.counts[i])
            pos0 = int(h.positions[start])
            mask = build_chunk_mask(pos0, n, self.device) if pos0 else None
            block_ids = tables[i, : -(-(pos0 + n) // self.block_size)]
            meta.prefills.append(PrefillChunk(start, start + n, pos0, block_ids, mask))
        return ids, pos, meta, rows

    def run(self, batch: ScheduledBatch) -> torch.Tensor:
        """Logits (fp32) of the sequences flagged in `batch.sampling`, in order: one row each, or
        1 + k rows for a sequence verifying k speculative proposals (its last token, then each guess)."""
        h = host_inputs(batch, self.block_size)
        if self.graphs is not None and h.is_decode and len(h.counts) <= self.graphs.max_batch:
            return self.graphs.run(h)
        input_ids, positions, meta, rows = self._prepare(h)
        hidden = self.model(input_ids, self.rope.lookup(positions), self.kv_caches, meta)
        if len(rows) < hidden.shape[0]:
            hidden = hidden[rows]
        return self.model.compute_logits(hidden)
