"""Turn a scheduled batch into tensors, run the model once, return the logits of sequences that sample."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from inference.attention import AttentionMetadata, PrefillChunk, build_chunk_mask
from inference.config import ModelConfig
from inference.models.llama import LlamaForCausalLM
from inference.models.rope import RotaryEmbedding
from inference.sequence import Sequence


@dataclass
class ScheduledBatch:
    """What one engine step computes, decodes (one new token) first, then prefill chunks.

    `sampling[i]` is true when `seqs[i]` reaches its last known token this step, so a new token is
    sampled for it; a partial prefill chunk only fills the cache.
    """

    seqs: list[Sequence]
    num_new_tokens: list[int]
    sampling: list[bool]

    @property
    def num_tokens(self) -> int:
        return sum(self.num_new_tokens)


def kv_block_bytes(cfg: ModelConfig, block_size: int, dtype: torch.dtype) -> int:
    """Bytes of one block across all layers (K and V)."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    return 2 * cfg.num_layers * block_size * cfg.num_kv_heads * cfg.head_dim * itemsize


class ModelRunner:
    def __init__(self, model: LlamaForCausalLM, num_blocks: int, block_size: int, max_model_len: int) -> None:
        cfg = model.config
        param = next(model.parameters())
        self.model, self.device, self.block_size = model, param.device, block_size
        # NOTE: zeros, not empty: padded decode gathers read unused slots, and masked-out garbage NaNs
        # would still poison the attention output (0 * NaN = NaN).
        shape = (2, cfg.num_kv_heads, num_blocks, block_size, cfg.head_dim)  # see attention.py
        self.kv_caches = [
            torch.zeros(shape, device=self.device, dtype=param.dtype) for _ in range(cfg.num_layers)
        ]
        self.rope = RotaryEmbedding(
            cfg.head_dim, max_model_len, cfg.rope_theta, cfg.rope_scaling, self.device, param.dtype
        )

    def _tensor(self, data: list[int]) -> torch.Tensor:
        return torch.tensor(data, dtype=torch.long, device=self.device)

    def prepare(self, batch: ScheduledBatch) -> tuple[torch.Tensor, torch.Tensor, AttentionMetadata]:
        """input ids, positions and attention metadata of the flattened batch."""
        bs = self.block_size
        ids: list[int] = []
        positions: list[int] = []
        for seq, n in zip(batch.seqs, batch.num_new_tokens, strict=True):
            start = seq.num_computed_tokens
            ids.extend(seq.token_ids[start : start + n])
            if start + n > seq.num_tokens:  # a decode followed by its speculative proposals
                ids.extend(seq.spec_token_ids[: start + n - seq.num_tokens])
            positions.extend(range(start, start + n))
        max_blocks = max(len(s.block_table) for s in batch.seqs)
        tables = self._tensor([s.block_table + [0] * (max_blocks - len(s.block_table)) for s in batch.seqs])
        pos = self._tensor(positions)
        rows = torch.repeat_interleave(
            torch.arange(len(batch.seqs), device=self.device), self._tensor(batch.num_new_tokens)
        )
        slot_mapping = tables[rows, pos // bs] * bs + pos % bs

        num_decodes = 0
        while num_decodes < len(batch.seqs) and batch.num_new_tokens[num_decodes] == 1:
            num_decodes += 1
        meta = AttentionMetadata(slot_mapping, num_decodes, None, None, 0)
        if num_decodes:
            context = [s.num_computed_tokens + 1 for s in batch.seqs[:num_decodes]]
            meta.decode_context_len = max(context)
            decode_blocks = -(-meta.decode_context_len // bs)
            meta.decode_block_tables = tables[:num_decodes, :decode_blocks]
            if min(context) != meta.decode_context_len:  # ragged: mask each row's padding
                keys = torch.arange(meta.decode_context_len, device=self.device)
                meta.decode_mask = (keys[None, :] < self._tensor(context)[:, None])[:, None, None, :]
        offset = num_decodes
        for i in range(num_decodes, len(batch.seqs)):
            seq, n = batch.seqs[i], batch.num_new_tokens[i]
            pos0 = seq.num_computed_tokens
            mask = build_chunk_mask(pos0, n, self.device) if pos0 else None
            block_ids = tables[i, : -(-(pos0 + n) // bs)]
            meta.prefills.append(PrefillChunk(offset, offset + n, pos0, block_ids, mask))
            offset += n
        return self._tensor(ids), pos, meta

    def run(self, batch: ScheduledBatch) -> torch.Tensor:
        """Logits (fp32) of the sequences flagged in `batch.sampling`, in order: one row each, or
        1 + k rows for a sequence verifying k speculative proposals (its last token, then each guess)."""
        input_ids, positions, meta = self.prepare(batch)
        hidden = self.model(input_ids, self.rope.lookup(positions), self.kv_caches, meta)
        rows: list[int] = []
        end = 0
        for seq, n, flag in zip(batch.seqs, batch.num_new_tokens, batch.sampling, strict=True):
            end += n
            if flag:
                rows.extend(range(end - 1 - len(seq.spec_token_ids), end))
        return self.model.compute_logits(hidden[self._tensor(rows)])
