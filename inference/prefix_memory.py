"""What the replica router remembers of the prompts it sent to one replica: chained hashes of their
fixed-size character blocks, so it can tell how much of a new prompt's prefix a replica has seen.

NOTE: this approximates the replica's KV cache from the outside (as cache-aware routers do, without
the server's block events): a block is "held" once a prompt containing it was sent there, and is
forgotten least-recently-used first past `capacity` blocks, roughly as the server evicts. Blocks
are characters, not tokens, so the router needs no tokenizer; a shared prefix still lines up,
because equal leading text gives equal leading blocks.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict


def prompt_blocks(messages: list[dict], salt: str | None, block_chars: int) -> list[bytes]:
    """Chained hashes of the prompt's whole `block_chars` blocks: block i's hash covers blocks 0..i
    and the tenant's salt, so equal hashes mean an equal prefix of the same tenant."""
    text = "".join(f"{m.get('role')}\x00{m.get('content') or ''}\x01" for m in messages)
    chain = hashlib.sha256(f"{salt or ''}\x02".encode()).digest()
    blocks = []
    for at in range(0, len(text) - block_chars + 1, block_chars):
        chain = hashlib.sha256(chain + text[at : at + block_chars].encode()).digest()[:16]
        blocks.append(chain)
    return blocks


class PrefixMemory:
    """The block hashes sent to one replica, most recently used last."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._blocks: OrderedDict[bytes, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def matched(self, blocks: list[bytes]) -> int:
        """How many of `blocks`, from the first, this replica holds (a chain stops at its first miss)."""
        count = 0
        for block in blocks:
            if block not in self._blocks:
                break
            count += 1
        return count

    def add(self, blocks: list[bytes]) -> None:
        for block in blocks:
            self._blocks[block] = None
            self._blocks.move_to_end(block)
        while len(self._blocks) > self.capacity:
            self._blocks.popitem(last=False)

    def clear(self) -> None:
        """A replica that died lost its cache: it starts again empty."""
        self._blocks.clear()
