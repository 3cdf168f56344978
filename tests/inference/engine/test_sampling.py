"""Sampling: each row follows its own parameters; seeds reproduce; logprobs and bitmasks are exact."""

from __future__ import annotations

import pytest
import torch

from inference.protocol import SamplingParams
from inference.sampling import apply_penalties, apply_token_bitmask, sample
from inference.sequence import Sequence


def seqs_with(params: SamplingParams, n: int, prompt=(0,), output=()) -> list[Sequence]:
    out = []
    for i in range(n):
        s = Sequence(str(i), [*prompt, *output], len(prompt), params, 1000)
        out.append(s)
    return out


def draw(logits_row: torch.Tensor, params: SamplingParams, n: int = 400) -> set[int]:
    return set(sample(logits_row.repeat(n, 1), seqs_with(params, n)).token_ids)


PROBS = torch.tensor([0.5, 0.3, 0.12, 0.08])


@pytest.mark.unit
def test_greedy_is_argmax():
    logits = torch.randn(5, 50, generator=torch.Generator().manual_seed(0))
    out = sample(logits.clone(), seqs_with(SamplingParams(temperature=0.0), 5))
    assert out.token_ids == logits.argmax(-1).tolist()


@pytest.mark.unit
@pytest.mark.parametrize(
    ("params", "support"),
    [
        (SamplingParams(temperature=1.0), {0, 1, 2, 3}),
        (SamplingParams(temperature=1.0, top_k=2), {0, 1}),
        (SamplingParams(temperature=1.0, top_p=0.7), {0, 1}),  # 0.5 before token 1 < 0.7; 0.8 before token 2
        (SamplingParams(temperature=1.0, min_p=0.2), {0, 1, 2}),  # keeps p >= 0.1
        (SamplingParams(temperature=1.0, top_k=3, top_p=0.99, min_p=0.5), {0, 1}),
    ],
)
def test_truncation_restricts_support(params, support):
    assert draw(PROBS.log(), params) == support


@pytest.mark.unit
def test_low_temperature_concentrates():
    # NOTE: at 0.05 token 1 keeps p = 4e-5, seen in 400 draws 1.6% of the time (a flaky test); 0.02: 1e-11.
    assert draw(PROBS.log(), SamplingParams(temperature=0.02)) == {0}


@pytest.mark.unit
def test_mixed_batch_applies_each_rows_params():
    params = [SamplingParams(temperature=0.0), SamplingParams(top_k=1), SamplingParams(top_p=0.6)]
    seqs = [Sequence(str(i), [0], 1, p, 100) for i, p in enumerate(params * 100)]
    logits = PROBS.log().repeat(len(seqs), 1)
    tokens = sample(logits, seqs).token_ids
    assert set(tokens[0::3]) == {0} and set(tokens[1::3]) == {0} and set(tokens[2::3]) == {0, 1}


@pytest.mark.unit
def test_penalties_follow_their_definitions():
    logits = torch.tensor([[2.0, -2.0, 2.0, -2.0, 1.0, 1.0]])
    seq = Sequence("p", [0, 1, 4, 4, 5], 2, SamplingParams(repetition_penalty=2.0), 100)
    apply_penalties(logits, [seq])
    # seen tokens: positive logits divided, negative multiplied; token 2 and 3 unseen.
    assert logits.tolist() == [[1.0, -4.0, 2.0, -2.0, 0.5, 0.5]]
    logits = torch.zeros(1, 6)
    params = SamplingParams(frequency_penalty=0.5, presence_penalty=1.0)
    seq = Sequence("p", [0, 1, 4, 4, 5], 2, params, 100)  # prompt tokens 0, 1 are not penalised
    apply_penalties(logits, [seq])
    assert logits.tolist() == [[0.0, 0.0, 0.0, 0.0, -2.0, -1.5]]


@pytest.mark.unit
def test_logprobs_are_raw_log_softmax():
    logits = torch.randn(2, 30, generator=torch.Generator().manual_seed(0))
    expected = logits.log_softmax(-1)
    seqs = [
        Sequence("a", [0], 1, SamplingParams(temperature=0.0, logprobs=3), 10),
        Sequence("b", [0], 1, SamplingParams(temperature=0.5, logprobs=None), 10),
    ]
    out = sample(logits.clone(), seqs)
    lp = out.logprobs[0]
    assert out.logprobs[1] is None
    assert lp.token_id == int(expected[0].argmax())
    assert lp.logprob == pytest.approx(float(expected[0].max()), abs=1e-6)
    top = expected[0].topk(3)
    assert list(lp.top) == top.indices.tolist()
    assert list(lp.top.values()) == pytest.approx(top.values.tolist(), abs=1e-6)


@pytest.mark.unit
def test_bitmask_bool_and_packed_agree():
    allowed = torch.zeros(2, 70, dtype=torch.bool)
    allowed[0, [3, 40, 69]] = True
    allowed[1, 33] = True
    packed = torch.zeros(2, 3, dtype=torch.int32)
    for row, col in allowed.nonzero().tolist():
        packed[row, col // 32] |= torch.tensor(1 << (col % 32)).to(torch.int32)
    a, b = torch.zeros(2, 70), torch.zeros(2, 70)
    apply_token_bitmask(a, allowed)
    apply_token_bitmask(b, packed)
    assert torch.equal(a, b) and torch.equal(a.isfinite(), allowed)
    out = sample(torch.randn(2, 70), seqs_with(SamplingParams(temperature=1.0), 2), bitmask=allowed)
    assert out.token_ids[0] in {3, 40, 69} and out.token_ids[1] == 33


@pytest.mark.unit
def test_seed_reproduces_whatever_the_batch(tiny_llama, make_engine):
    engine = make_engine(tiny_llama)
    prompt = [5, 6, 7, 8]
    seeded = SamplingParams(max_tokens=20, temperature=1.0, seed=1234, ignore_eos=True)
    alone = engine.generate([prompt], seeded)[0][0]
    other = SamplingParams(max_tokens=20, temperature=1.0, ignore_eos=True)
    in_batch = engine.generate([[1, 2, 3], prompt, [9] * 30], [other, seeded, other])[1][0]
    assert in_batch == alone
    different = engine.generate(
        [prompt], SamplingParams(max_tokens=20, temperature=1.0, seed=99, ignore_eos=True)
    )
    assert different[0][0] != alone


@pytest.mark.unit
@pytest.mark.parametrize(("top_k", "top_p"), [(0, 0.5), (300, 0.9), (0, 0.999), (2000, 0.2)])
def test_large_nuclei_match_a_full_sort(top_k, top_p):
    # A gentle slope over 5000 tokens: nuclei hold hundreds or thousands of tokens, more than the
    # candidate shortlist, so the flat-distribution path decides; compare with the sorting definition.
    logits = -torch.arange(5000, dtype=torch.float32) * 2e-3
    probs = logits.softmax(-1)
    expected = int(((probs.cumsum(-1) - probs) <= top_p).sum())
    if top_k:
        expected = min(expected, top_k)
    row = logits[None].clone()
    sample(row, seqs_with(SamplingParams(top_k=top_k, top_p=top_p), 1))
    assert abs(int(row.isfinite().sum()) - expected) <= 1


@pytest.mark.unit
@pytest.mark.parametrize("temperature", [1e-30, 1e-8, 5e-324])
def test_a_temperature_near_zero_is_greedy_even_beside_sampled_rows(temperature):
    logits = torch.randn(6, 50, generator=torch.Generator().manual_seed(3)) * 30
    tiny = seqs_with(SamplingParams(temperature=temperature, logprobs=2), 3)
    sampled = seqs_with(SamplingParams(temperature=1.0, top_p=0.9, seed=1), 3)
    out = sample(logits.clone(), tiny + sampled)
    assert out.token_ids[:3] == logits[:3].argmax(-1).tolist()
    assert all(lp is not None and torch.isfinite(torch.tensor(lp.logprob)) for lp in out.logprobs[:3])
    assert all(0 <= t < 50 for t in out.token_ids)
