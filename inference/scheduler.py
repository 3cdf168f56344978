"""Decide which tokens each engine step computes.

Each step has a token budget (`max_num_batched_tokens`) and a sequence cap (`max_num_seqs`). Running
sequences go first, oldest first: a decoding sequence needs one token, a prefilling one gets its next
chunk (at most `prefill_chunk_size`), so a long prompt is spread over several steps and never stalls
the decodes batched with it. Leftover budget admits waiting sequences: equal shares with borrowing
between tenants (`SamplingParams.cache_salt`, which the platform sets to the tenant): the next one
admitted is the oldest waiting sequence of the tenant with the fewest running, so a tenant that
queued hundreds of sequences delays another's by at most the sequences already running. With one
tenant (or none named) this is first come, first served.

A waiting sequence whose next uncached block is one this step computes for another sequence (a
system prompt shared by requests that arrived together) waits a step instead: then that block is in
the prefix cache and it computes only what it does not share. Without this, every request admitted in
the same step computed the shared prefix again.

When the block pool cannot hold a running sequence's next tokens, the most recently admitted running
sequence is preempted by recompute: its blocks are freed and it goes back to the front of the waiting
queue with `num_computed_tokens = 0` (its prefix-cached blocks usually make the recompute cheap).

NOTE: the scheduler is the one writer of sequence state, as in vLLM v1: proposers return guesses
(`schedule` puts them on the sequences), the runner returns logits, the engine turns them into each
sequence's new tokens and stop reason (`SeqUpdate`), and `update_from_output` applies those: progress,
tokens, prefix-cache commits, finishing.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from dataclasses import dataclass

from inference.block_manager import BlockManager, chain_hash, root_hash
from inference.model_runner import ScheduledBatch
from inference.protocol import FinishReason
from inference.sequence import SeqStatus, Sequence
from inference.spec import Proposal


@dataclass
class SeqUpdate:
    """What one step did for a sequence that sampled: its new tokens, how many of the tokens it fed
    now have K/V in the cache (all of a plain chunk; the last token and the accepted guesses of a
    verifying one), and why it stops, if it does."""

    tokens: list[int]
    computed: int
    finish_reason: FinishReason | None


class Scheduler:
    def __init__(
        self,
        block_manager: BlockManager,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        prefill_chunk_size: int,
    ) -> None:
        self.block_manager = block_manager
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.prefill_chunk_size = prefill_chunk_size
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.num_preemptions_total = 0
        self.prefix_cache_queries = 0  # tokens looked up at admissions (resumptions included)
        self.prefix_cache_hits = 0

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def finish(self, seq: Sequence, reason: FinishReason) -> None:
        """End a sequence (finished or aborted) wherever it is and free its blocks."""
        seq.finish_reason = reason
        if seq.status is SeqStatus.RUNNING:
            self.running.remove(seq)
        elif seq.status is SeqStatus.WAITING:
            self.waiting.remove(seq)
        seq.status = SeqStatus.FINISHED
        self.block_manager.free(seq)

    def _next_waiting(self) -> Sequence:
        """The oldest waiting sequence of the tenant with the fewest running (see the module note)."""
        first = self.waiting[0]
        if all(s.params.cache_salt == first.params.cache_salt for s in self.waiting):
            return first
        running = Counter(s.params.cache_salt for s in self.running)
        return min(enumerate(self.waiting), key=lambda item: (running[item[1].params.cache_salt], item[0]))[1]

    def _chunk(self, seq: Sequence, budget: int) -> int:
        """Tokens to compute for `seq` this step; speculative proposals beyond it are dropped."""
        todo = seq.num_tokens + len(seq.spec_token_ids) - seq.num_computed_tokens
        n = min(todo, self.prefill_chunk_size, budget)
        if seq.spec_token_ids:
            del seq.spec_token_ids[max(0, n - 1) :]
        return n

    def _in_flight(self, scheduled: list[tuple[Sequence, int]]) -> set[bytes]:
        """Hashes of the blocks of real tokens that `scheduled`'s chunks complete this step."""
        bs, hashes = self.block_manager.block_size, set()
        for seq, n in scheduled:
            parent = seq.block_hashes[-1] if seq.block_hashes else root_hash(seq)
            for i in range(len(seq.block_hashes), min(seq.num_computed_tokens + n, seq.num_tokens) // bs):
                parent = chain_hash(parent, seq.token_ids[i * bs : (i + 1) * bs])
                hashes.add(parent)
        return hashes

    def _follows(self, seq: Sequence, in_flight: set[bytes]) -> bool:
        """Whether `seq`'s next block (past its prefix hit) could hit once this step's blocks are in."""
        bs, i = self.block_manager.block_size, len(seq.block_hashes)
        if (i + 1) * bs > seq.num_tokens - 1:  # match_prefix never hits the block of the last token
            return False
        parent = seq.block_hashes[-1] if seq.block_hashes else root_hash(seq)
        return chain_hash(parent, seq.token_ids[i * bs : (i + 1) * bs]) in in_flight

    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        seq.spec_token_ids = []
        self.block_manager.free(seq)
        seq.num_computed_tokens = 0
        seq.status = SeqStatus.WAITING
        self.waiting.appendleft(seq)
        self.num_preemptions_total += 1

    def schedule(self, proposals: dict[Sequence, Proposal] | None = None) -> ScheduledBatch | None:
        """The next step's batch; `proposals` are guesses to verify for running sequences."""
        for seq in self.running:
            proposal = (proposals or {}).get(seq)
            seq.spec_token_ids = list(proposal.token_ids) if proposal else []
            seq.draft_probs = proposal.probs if proposal else None
        budget = self.max_num_batched_tokens
        scheduled: list[tuple[Sequence, int]] = []
        preempted = False
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            n = self._chunk(seq, budget)
            while not self.block_manager.allocate(seq, seq.num_computed_tokens + n):
                if seq.spec_token_ids:  # speculation never preempts anyone: decode plainly instead
                    seq.spec_token_ids = []
                    n = 1
                    continue
                # NOTE: victims are always at index >= i (never one already scheduled this step);
                # when `seq` is the newest itself it preempts itself and the loop ends.
                victim = self.running[-1]
                self._preempt(victim)
                preempted = True
                if victim is seq:
                    break
            if seq.status is SeqStatus.WAITING:
                break
            scheduled.append((seq, n))
            budget -= n
            i += 1

        # Admitting while preempting would only thrash: the freed blocks go to the running sequences.
        order, deferred, in_flight = list(self.waiting), False, None
        while not preempted and self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self._next_waiting()
            looked_up = not seq.block_table
            if looked_up:
                seq.num_computed_tokens = self.block_manager.match_prefix(seq)
                if self.block_manager.enable_prefix_caching and scheduled:
                    in_flight = self._in_flight(scheduled) if in_flight is None else in_flight
                    if self._follows(seq, in_flight):  # next step it hits what this step computes
                        self.block_manager.free(seq)
                        seq.num_computed_tokens = 0
                        self.waiting.remove(seq)
                        deferred = True
                        continue
            n = self._chunk(seq, budget)
            if not self.block_manager.allocate(seq, seq.num_computed_tokens + n):
                self.block_manager.free(seq)
                seq.num_computed_tokens = 0
                break
            self.waiting.remove(seq)
            if looked_up and self.block_manager.enable_prefix_caching:  # counted once per admission
                self.prefix_cache_queries += seq.num_tokens
                self.prefix_cache_hits += seq.num_computed_tokens
            if seq.num_cached_tokens is None:  # first admission: what the prefix cache saved this request
                seq.num_cached_tokens = seq.num_computed_tokens
                seq.scheduled_at = time.time()
            seq.status = SeqStatus.RUNNING
            self.running.append(seq)
            scheduled.append((seq, n))
            budget -= n
            if in_flight is not None:
                in_flight |= self._in_flight([(seq, n)])

        if deferred:  # back in their places, for the next step
            self.waiting = deque(s for s in order if s.status is SeqStatus.WAITING)
        if not scheduled:
            return None
        # Stable, shortest chunks first: decodes and verification chunks lead (attended together).
        scheduled.sort(key=lambda item: item[1])
        return ScheduledBatch(
            seqs=[s for s, _ in scheduled],
            num_new_tokens=[n for _, n in scheduled],
            sampling=[s.num_computed_tokens + n >= s.num_tokens for s, n in scheduled],
        )

    def update_from_output(
        self, batch: ScheduledBatch, updates: dict[Sequence, SeqUpdate], failed: set[str]
    ) -> None:
        """Apply a step: a sequence that only fed a prompt chunk advances by it; one that sampled also
        gets its tokens and, if it stops, ends. `failed` ones are left to be aborted."""
        for seq, n in zip(batch.seqs, batch.num_new_tokens, strict=True):
            if seq.request_id in failed:
                continue
            update = updates.get(seq)
            seq.num_computed_tokens += n if update is None else update.computed
            seq.spec_token_ids, seq.draft_probs = [], None
            if update is not None:
                seq.token_ids.extend(update.tokens)
            # NOTE: only now are the verified tokens behind num_computed_tokens, so only now may
            # their full blocks enter the prefix cache (before the blocks are freed by finishing).
            self.block_manager.commit_full_blocks(seq)
            if update is not None and update.finish_reason is not None:
                self.finish(seq, update.finish_reason)
