"""Block pool: allocation never over-commits, the prefix cache shares blocks and evicts LRU."""

from __future__ import annotations

import pytest

from inference.block_manager import BlockManager
from inference.protocol import SamplingParams
from inference.sequence import Sequence


def seq(tokens: list[int], name: str = "s") -> Sequence:
    return Sequence(name, list(tokens), len(tokens), SamplingParams(), 10_000)


def compute(bm: BlockManager, s: Sequence) -> None:
    """Pretend the model ran over all of `s`'s tokens."""
    assert bm.allocate(s, s.num_tokens)
    s.num_computed_tokens = s.num_tokens
    bm.commit_full_blocks(s)


@pytest.mark.unit
def test_allocate_grows_on_demand_and_refuses_without_side_effects():
    bm = BlockManager(num_blocks=4, block_size=4, enable_prefix_caching=False)
    a = seq(list(range(6)))
    assert bm.allocate(a, 6) and len(a.block_table) == 2
    assert bm.allocate(a, 8) and len(a.block_table) == 2  # still fits
    assert bm.allocate(a, 9) and len(a.block_table) == 3
    b = seq([1] * 8, "b")
    assert not bm.allocate(b, 8) and b.block_table == [] and bm.num_free_blocks == 1
    bm.free(a)
    assert bm.allocate(b, 8)
    bm.free(b)
    bm.check_all_free()


@pytest.mark.unit
def test_prefix_blocks_are_shared_and_survive_their_first_owner():
    bm = BlockManager(num_blocks=8, block_size=4)
    a = seq(list(range(10)))
    compute(bm, a)
    b = seq(list(range(9)) + [99], "b")
    assert bm.match_prefix(b) == 8  # two full blocks of the 9-token common prefix
    assert b.block_table == a.block_table[:2]
    assert [bm.blocks[i].ref_count for i in b.block_table] == [2, 2]
    bm.free(a)
    assert [bm.blocks[i].ref_count for i in b.block_table] == [1, 1]
    bm.free(b)
    c = seq(list(range(12)), "c")
    assert bm.match_prefix(c) == 8  # revived from the free queue
    bm.free(c)
    bm.check_all_free()


@pytest.mark.unit
def test_last_token_is_never_a_cache_hit():
    bm = BlockManager(num_blocks=8, block_size=4)
    a = seq(list(range(8)))
    compute(bm, a)
    bm.free(a)
    again = seq(list(range(8)))
    assert bm.match_prefix(again) == 4  # the block holding the last token is recomputed
    bm.free(again)


@pytest.mark.unit
def test_lru_evicts_cached_blocks_when_the_pool_is_needed():
    bm = BlockManager(num_blocks=4, block_size=4)
    old = seq(list(range(8)))
    compute(bm, old)
    bm.free(old)
    assert bm.num_free_blocks == 4  # cached but free
    big = seq([7] * 16, "big")
    assert bm.allocate(big, 16)  # needs every block: the cached ones are evicted
    bm.free(big)
    probe = seq(list(range(9)), "probe")
    assert bm.match_prefix(probe) == 0
    bm.check_all_free()


@pytest.mark.unit
def test_free_twice_is_caught():
    bm = BlockManager(num_blocks=2, block_size=4)
    a = seq([1, 2, 3])
    assert bm.allocate(a, 3)
    table = list(a.block_table)
    bm.free(a)
    a.block_table = table
    with pytest.raises(AssertionError, match="freed twice"):
        bm.free(a)
