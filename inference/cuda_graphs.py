"""Decode steps replayed from CUDA graphs, one captured per batch-size bucket (as vLLM and nano-vllm do).

A decode step of a small model is launch-bound: hundreds of small kernels whose launches cost more
than their work. Each bucket's graph runs the whole forward plus the LM head over static buffers
(token ids, positions, slot mapping, context lengths, block tables); a step writes its inputs into
a pinned host staging copy, moves them with two copies, and replays the smallest bucket that fits.

NOTE: padding rows (bucket size above the batch) have context length 0 (the kernel attends nothing
and writes zeros), token 0 at position 0, and write their K/V into the runner's scratch block (the
one past the pool), so they never touch a sequence's cache. Their logits rows are dropped.
NOTE: the pinned staging buffers are reused every step, so before writing them a step waits for the
previous step's copies (an event; the engine's host sync on sampled tokens has usually passed it).
Without that wait, callers that replay steps back to back with no sync in between (the benchmark's
parity check did) had a step's copy read the next step's inputs.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import torch

from inference.attention import AttentionMetadata, PagedBatch

if TYPE_CHECKING:
    from inference.model_runner import HostInputs, ModelRunner

log = logging.getLogger(__name__)


def batch_buckets(max_batch: int) -> list[int]:
    small = [b for b in (1, 2, 4, 8) if b < max_batch]
    return small + list(range(16, max_batch, 16)) + [max_batch]


class DecodeGraphs:
    """The captured graphs and their static buffers; on CPU the buffers alone, run eagerly (tests)."""

    def __init__(self, runner: ModelRunner, max_batch: int, max_blocks: int, scratch_block: int) -> None:
        self.runner, self.max_batch = runner, max_batch
        self.buckets = batch_buckets(max_batch)
        device = runner.device
        self.scratch_slot = scratch_block * runner.block_size
        # Rows: input ids, positions, slot mapping, context lengths, token -> row (identity).
        self.inputs = torch.zeros(5, max_batch, dtype=torch.long, device=device)
        self.block_tables = torch.zeros(max_batch, max_blocks, dtype=torch.int32, device=device)
        pin = device.type == "cuda"
        self.host_inputs = torch.zeros(5, max_batch, dtype=torch.long, pin_memory=pin)
        self.host_tables = torch.zeros(max_batch, max_blocks, dtype=torch.int32, pin_memory=pin)
        self.inputs[4] = torch.arange(max_batch, device=device)
        self.inputs[2] = self.scratch_slot
        self.copied = torch.cuda.Event() if pin else None  # the last step's host-to-device copies
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.logits: dict[int, torch.Tensor] = {}
        if not pin:  # CPU (tests): the same static buffers, run eagerly instead of replayed
            return
        began = time.perf_counter()
        self._capture()
        log.info(
            "captured decode CUDA graphs for batch sizes %s in %.1f s",
            self.buckets,
            time.perf_counter() - began,
        )

    def _forward(self, n: int) -> torch.Tensor:
        ids, positions, slots, context, token_seq = self.inputs[:, :n]
        bs = self.runner.block_size
        meta = AttentionMetadata(
            slots,
            # max_context: the torch backend (CPU tests only) gathers every block of the static tables.
            paged=PagedBatch(n, self.block_tables[:n], token_seq, context, self.block_tables.shape[1] * bs),
            backend=self.runner.backend,
        )
        model = self.runner.model
        hidden = model(ids, self.runner.rope.lookup(positions), self.runner.kv_caches, meta)
        return model.compute_logits(hidden)

    @torch.inference_mode()
    def _capture(self) -> None:
        pool = None
        for n in reversed(self.buckets):  # largest first, so smaller graphs reuse its memory pool
            self._forward(n)  # warm-up: kernel compilation and library handles stay outside the graph
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                self.logits[n] = self._forward(n)
            pool = graph.pool()
            self.graphs[n] = graph
        torch.cuda.synchronize()

    def run(self, h: HostInputs) -> torch.Tensor:
        """Logits `[batch, vocab]` of a pure decode step (one token per sequence, every one sampling)."""
        n = len(h.counts)
        bucket = next(b for b in self.buckets if b >= n)
        if self.copied is not None:
            self.copied.synchronize()  # the staging buffers are free again
        host = self.host_inputs.numpy()
        host[0, :n] = h.input_ids
        host[1, :n] = h.positions
        host[2, :n] = h.slot_mapping
        host[3, :n] = h.positions + 1
        host[:4, n:bucket] = 0
        host[2, n:bucket] = self.scratch_slot
        width = h.block_tables.shape[1]
        self.host_tables.numpy()[:n, :width] = h.block_tables
        # Whole rows: contiguous pinned memory goes in one asynchronous copy each.
        self.inputs[:4].copy_(self.host_inputs[:4], non_blocking=True)
        self.block_tables[:n].copy_(self.host_tables[:n], non_blocking=True)
        if self.copied is not None:
            self.copied.record()
        if not self.graphs:
            return self._forward(bucket)[:n]
        self.graphs[bucket].replay()
        return self.logits[bucket][:n]
