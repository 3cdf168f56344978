"""Fixed-size KV-cache blocks: allocation, sharing and the prefix cache.

Invariants (checked by tests after every run):
- every block is either referenced (`ref_count > 0`, in some sequence's block table) or in the free
  queue (`ref_count == 0`), never both;
- a block in `_cached` holds K/V of exactly the tokens its hash names, so it may be shared read-only;
- blocks are only written while a single sequence owns them: a sequence appends K/V only past its
  cached prefix, in blocks it allocated itself.
"""

from __future__ import annotations

import hashlib
import math
from array import array
from collections import OrderedDict
from dataclasses import dataclass

from inference.sequence import Sequence


@dataclass
class Block:
    block_id: int
    ref_count: int = 0
    hash: bytes | None = None  # set once the block is full and registered in the prefix cache


_NO_SALT = hashlib.sha256(b"groundwork prefix cache: no salt").digest()


def chain_hash(parent: bytes, tokens: list[int]) -> bytes:
    """sha256 over the parent block's hash and this block's token ids.

    NOTE: the parent hash chains the whole prefix (and the salt, in the root) into each block's key,
    so equal keys mean equal prefixes. A collision would serve one request another's K/V, so the hash
    is cryptographic (as vLLM's since 0.10.2), not Python's 64-bit `hash`.
    """
    return hashlib.sha256(parent + array("q", tokens).tobytes()).digest()


def root_hash(seq: Sequence) -> bytes:
    """The parent of a sequence's first block: its cache salt's hash, so salts never share blocks.

    NOTE: salts clients send to the OpenAI server are keyed with the server's secret there
    (`inference/server/deps.py`), so a client that knows a tenant id still cannot name its salt.
    """
    salt = seq.params.cache_salt
    return _NO_SALT if salt is None else hashlib.sha256(b"salt\0" + salt.encode()).digest()


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True) -> None:
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.enable_prefix_caching = enable_prefix_caching
        self.blocks = [Block(i) for i in range(num_blocks)]
        # NOTE: LRU order: reuse pops from the front, freeing appends at the back, so cached blocks
        # freed long ago are evicted first and recently used prefixes survive.
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self._cached: dict[bytes, int] = {}  # block hash -> block id

    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    @property
    def usage(self) -> float:
        return 1.0 - len(self._free) / self.num_blocks

    def blocks_needed(self, seq: Sequence, num_tokens: int) -> int:
        return max(0, math.ceil(num_tokens / self.block_size) - len(seq.block_table))

    def match_prefix(self, seq: Sequence) -> int:
        """Attach cached blocks matching the start of `seq` (which owns no block); returns tokens hit.

        NOTE: only blocks wholly inside the first `num_tokens - 1` tokens may hit, so at least one token
        is always computed (its logits are needed) and it lands in a block this sequence owns.
        """
        assert not seq.block_table
        if not self.enable_prefix_caching:
            return 0
        bs, parent = self.block_size, root_hash(seq)
        for i in range((seq.num_tokens - 1) // bs):
            h = chain_hash(parent, seq.token_ids[i * bs : (i + 1) * bs])
            block_id = self._cached.get(h)
            if block_id is None:
                break
            block = self.blocks[block_id]
            if block.ref_count == 0:
                del self._free[block_id]
            block.ref_count += 1
            seq.block_table.append(block_id)
            seq.block_hashes.append(h)
            parent = h
        return len(seq.block_table) * bs

    def allocate(self, seq: Sequence, num_tokens: int) -> bool:
        """Grow `seq`'s block table to hold `num_tokens`; False (and no change) if the pool is short."""
        needed = self.blocks_needed(seq, num_tokens)
        if needed > len(self._free):
            return False
        for _ in range(needed):
            block_id, _ = self._free.popitem(last=False)
            block = self.blocks[block_id]
            if block.hash is not None:  # evict it from the prefix cache
                if self._cached.get(block.hash) == block_id:
                    del self._cached[block.hash]
                block.hash = None
            block.ref_count = 1
            seq.block_table.append(block_id)
        return True

    def free(self, seq: Sequence) -> None:
        # Tail blocks first, so the LRU evicts a sequence's suffix before its (more shareable) prefix.
        for block_id in reversed(seq.block_table):
            block = self.blocks[block_id]
            block.ref_count -= 1
            assert block.ref_count >= 0, f"block {block_id} freed twice"
            if block.ref_count == 0:
                if block.hash is None or not self.enable_prefix_caching:
                    block.hash = None
                    self._free[block_id] = None
                    self._free.move_to_end(block_id, last=False)  # uncached: reuse these first
                else:
                    self._free[block_id] = None
        seq.block_table = []
        seq.block_hashes = []

    def commit_full_blocks(self, seq: Sequence) -> None:
        """Register the blocks `seq` has completely computed in the prefix cache."""
        if not self.enable_prefix_caching:
            return
        bs = self.block_size
        for i in range(len(seq.block_hashes), seq.num_computed_tokens // bs):
            parent = seq.block_hashes[-1] if seq.block_hashes else root_hash(seq)
            h = chain_hash(parent, seq.token_ids[i * bs : (i + 1) * bs])
            seq.block_hashes.append(h)
            block = self.blocks[seq.block_table[i]]
            if h not in self._cached:
                block.hash = h
                self._cached[h] = block.block_id

    def check_all_free(self) -> None:
        """Assert no block leaked (used by tests once every request has finished)."""
        leaked = [b.block_id for b in self.blocks if b.ref_count]
        assert not leaked and len(self._free) == self.num_blocks, f"leaked blocks: {leaked}"
