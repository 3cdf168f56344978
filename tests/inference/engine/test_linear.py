"""Packed CPU projections (inference/models/linear.py) compute what F.linear computes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from inference.models.linear import can_pack, linear, pack

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("bias", [False, True])
def test_packed_linear_equals_f_linear_for_every_row_count(bias):
    gen = torch.Generator().manual_seed(0)
    weight = torch.randn(96, 64, generator=gen)
    b = torch.randn(96, generator=gen) if bias else None
    packed = pack(weight, 8)
    for rows in range(1, 12):  # 1 and 9+ take F.linear, 2-8 the packed kernel
        x = torch.randn(rows, 64, generator=gen)
        out = linear(x, weight, b, packed)
        assert out.shape == (rows, 96)
        torch.testing.assert_close(out, F.linear(x, weight, b), atol=1e-5, rtol=1e-5)


def test_only_fp32_cpu_weights_are_packed(tiny_llama, make_engine):
    assert can_pack(torch.zeros(4, 4))
    assert not can_pack(torch.zeros(4, 4, dtype=torch.bfloat16))
    packed = make_engine(tiny_llama)
    assert packed.model.packed_head is not None and packed.model.layers[0].packed
    plain = make_engine(tiny_llama, cpu_packed_rows=0)
    assert plain.model.packed_head is None and not plain.model.layers[0].packed
    bf16 = make_engine(tiny_llama, dtype=torch.bfloat16)
    assert bf16.model.packed_head is None  # MKL packs fp32 only: left as it was
    assert bf16.model.pack_weights(8) == 0
    model = plain.model
    projections = [p for name, p in model.named_parameters() if name.endswith("proj.weight")]
    copied = sum(p.numel() * 4 for p in [*projections, model.head_weight])
    assert model.pack_weights(8) == copied  # a second copy of every projection and the head
    assert model.packed_head is not None


def test_greedy_outputs_are_the_same_with_and_without_packing(tiny_llama, make_engine):
    from inference.protocol import SamplingParams

    params = SamplingParams(max_tokens=16, temperature=0.0, ignore_eos=True)
    prompts = [[(7 * i + j) % 50 + 1 for j in range(5 + i)] for i in range(6)]  # decode batches of 2-6 rows
    packed, plain = make_engine(tiny_llama), make_engine(tiny_llama, cpu_packed_rows=0)
    assert packed.generate(prompts, params) == plain.generate(prompts, params)
