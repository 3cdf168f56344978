"""GGUF weights kept 4/8-bit: block mappings equal gguf's own dequantization, our kernel's matmuls equal
the dequantised reference, and greedy outputs do not depend on the batch size
(with bf16 copies: but for near ties)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

from inference.models import linear as linear_module
from inference.models.linear import (
    AMX_COPY_MIN_BYTES,
    QUANT_MAX_ROWS,
    QUANT_MAX_ROWS_AMX,
    QUANT_MAX_ROWS_UNCOPIED,
    kernel_rows,
    linear,
    quant_max_rows,
    with_dense_copy,
)
from inference.quant import kernel as kernel_module
from inference.quant.gguf_blocks import dequantized, to_quant
from inference.quant.kernel import activation_grid, load_kernel, qlinear

ROWS, COLS = 48, 512
EXACT = {T.Q4_0: "q4", T.Q4_1: "q4", T.Q4_K: "q4", T.Q5_0: "q5", T.Q5_1: "q5", T.Q8_0: "q8"}
REQUANTISED = (T.Q5_K, T.Q6_K)


def _random_blocks(qtype: T, rng: np.random.Generator) -> np.ndarray:
    """Raw bytes of a `[ROWS, COLS]` tensor: quantized by gguf where it can, else random blocks with
    finite, small f16 scales (k-quants, which gguf-py only dequantizes)."""
    if qtype not in (T.Q4_K, T.Q5_K, T.Q6_K):
        return quantize(rng.standard_normal((ROWS, COLS)).astype(np.float32), qtype)
    block = {T.Q4_K: 144, T.Q5_K: 176, T.Q6_K: 210}[qtype]
    raw = rng.integers(0, 256, (ROWS * COLS // 256, block), dtype=np.uint8)
    scales = rng.uniform(0.001, 0.01, (len(raw), 2)).astype(np.float16).view(np.uint8)
    if qtype != T.Q6_K:
        raw[:, 0:4] = scales  # d, dmin
    else:
        raw[:, 208:210] = scales[:, :2]  # d (after ql, qh and the int8 sub-scales)
    return raw.reshape(ROWS, -1)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    lib = load_kernel(tmp_path_factory.mktemp("kernels"))
    if lib is None:
        pytest.skip("no C compiler: the quantized kernel cannot be built here")
    return lib


@pytest.mark.unit
@pytest.mark.parametrize("qtype", [*EXACT, *REQUANTISED], ids=lambda t: t.name)
def test_quantized_matmul_equals_the_dequantised_reference(kernel, qtype, monkeypatch):
    rng = np.random.default_rng(int(qtype))
    data = _random_blocks(qtype, rng)
    reference = torch.from_numpy(np.asarray(dequantize(data, qtype), dtype=np.float32).reshape(ROWS, COLS))
    w = to_quant(data, qtype, ROWS, COLS)
    assert w.kind == EXACT.get(qtype, "q8")
    error = (dequantized(w) - reference).abs().max()
    if qtype in EXACT:
        assert error == 0  # the same weights, regrouped
    else:  # requantised to 127 levels per group of 32
        assert error <= reference.abs().max() / 254 * 1.01
    x = torch.randn(5, COLS, generator=torch.Generator().manual_seed(0))
    bias = torch.randn(ROWS)
    expected = x @ reference.T + bias
    got = qlinear(x, w, bias)
    # NOTE: activations are quantized to int8 per group of 32 (as llama.cpp does): ~0.5% of the scale.
    assert (got - expected).abs().max() <= 0.01 * expected.abs().max()
    # Each row's result is independent of the others in the batch, bit for bit.
    assert torch.equal(qlinear(x[2:3], w, bias), got[2:3])
    # This small weight runs on one thread; on all of them (large weights) the result is the same.
    monkeypatch.setattr(kernel_module, "PARALLEL_MIN_BYTES", 0)
    assert torch.get_num_threads() == 1 or torch.equal(qlinear(x, w, bias), got)
    # Without a dense copy, up to QUANT_MAX_ROWS_UNCOPIED rows stay in the kernel, row for row.
    more = torch.randn(QUANT_MAX_ROWS_UNCOPIED, COLS, generator=torch.Generator().manual_seed(1))
    some = torch.cat([x, more[5:]])
    assert torch.equal(linear(some, torch.empty(0), bias, w)[:5], got)
    # Longer chunks take sgemm over the same grids: equal up to summation order (of 512 products).
    long = torch.cat([x, more])
    scale = got.abs().max().item()
    torch.testing.assert_close(linear(long, torch.empty(0), bias, w)[:5], got, rtol=1e-5, atol=1e-5 * scale)
    # Or bf16 over a copy dequantized once (CPUs with native bf16): bf16 rounds inputs to 8 bits.
    # The copy is reordered once into oneDNN's layout, which changes no bit of the products.
    dense = with_dense_copy(w)
    plain = F.linear(activation_grid(long, torch.bfloat16), dequantized(w).bfloat16()).float() + bias
    assert torch.equal(linear(long, torch.empty(0), bias, dense), plain)
    assert (plain[:5] - got).abs().max() <= 0.01 * got.abs().max()
    # ... and long chunks do read that copy when there is one (a zero copy leaves only the bias).
    mn = None if w.mn is None else torch.zeros_like(w.mn)
    zero = with_dense_copy(replace(w, d=torch.zeros_like(w.d), mn=mn))
    assert torch.equal(linear(long, torch.empty(0), bias, zero), bias.expand(len(long), -1))


@pytest.mark.unit
@pytest.mark.parametrize("kind", ["q4", "q5", "q8"])
def test_an_odd_group_count_ends_with_a_single_group(kernel, kind):
    """17 groups along k: with 512-bit VNNI the kernel takes groups two at a time and the last one
    alone; every row matches the dequantised reference and does not depend on its batch."""
    g = torch.Generator().manual_seed(4)
    n, k = 40, 17 * 32
    d = torch.rand(n, k // 32, generator=g) * 0.01
    if kind == "q8":
        q, qh, mn = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=g), None, None
    else:
        q = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=g)
        qh = (
            torch.randint(-(2**31), 2**31 - 1, (n, k // 32), dtype=torch.int32, generator=g)
            if kind == "q5"
            else None
        )
        mn = torch.randn(n, k // 32, generator=g) * 0.01 if kind == "q4" else None
    w = kernel_module.QuantWeight(kind, q, d, mn, "test", qh)
    x = torch.randn(6, k, generator=g)
    expected = x @ dequantized(w).T
    got = qlinear(x, w)
    assert (got - expected).abs().max() <= 0.01 * expected.abs().max()
    assert torch.equal(qlinear(x[5:], w), got[5:])  # four rows together, then one alone


@pytest.mark.unit
def test_amx_hands_big_models_long_decode_batches_to_the_bf16_copies(monkeypatch):
    """With AMX, models past AMX_COPY_MIN_BYTES kept quantized serve more than 4 rows from their bf16
    copies; smaller models, and CPUs without AMX, keep the kernel up to 8 rows (uncopied weights: 64)."""
    big, small = AMX_COPY_MIN_BYTES + 1, AMX_COPY_MIN_BYTES // 2
    for amx, expected in (
        (True, (QUANT_MAX_ROWS_AMX, QUANT_MAX_ROWS)),
        (False, (QUANT_MAX_ROWS, QUANT_MAX_ROWS)),
    ):
        monkeypatch.setattr(linear_module, "has_amx", lambda amx=amx: amx)
        assert (kernel_rows(big), kernel_rows(small)) == expected
    blocks = quantize(np.random.default_rng(5).standard_normal((ROWS, COLS)).astype(np.float32), T.Q4_0)
    w = to_quant(blocks, T.Q4_0, ROWS, COLS)
    assert quant_max_rows(w) == QUANT_MAX_ROWS_UNCOPIED
    assert quant_max_rows(with_dense_copy(w, QUANT_MAX_ROWS_AMX)) == QUANT_MAX_ROWS_AMX


@pytest.mark.unit
def test_activation_grid_rounds_as_the_kernel_quantizes(kernel):
    """Long chunks multiply the activations on the int8 grid (one pass in C): each group's max|x| / 127
    times round(x / that), half to even; exactly in fp32, and as torch rounds that to bf16."""

    x = torch.randn(9, COLS, generator=torch.Generator().manual_seed(1)) * 3
    x[0, :32] = 0  # an all-zero group stays zero
    x[1, :32] = torch.cat([torch.tensor([127.0]), torch.arange(31) + 0.5])  # scale 1: ties, to even
    g = x.view(9, -1, 32)
    d = g.abs().amax(dim=-1, keepdim=True) / 127
    expected = (torch.round(g * torch.where(d > 0, 1 / d, torch.zeros_like(d))) * d).view(9, COLS)
    assert torch.equal(activation_grid(x), expected)
    assert torch.equal(activation_grid(x, torch.bfloat16), expected.bfloat16())
    assert not torch.equal(expected, x)


@pytest.mark.unit
def test_gated_mlp_takes_the_product_and_its_grid_from_the_bf16_output(kernel, monkeypatch):
    """Long chunks over bf16 copies: silu(gate) * up and its int8 grid in one C pass from gate/up's bf16
    output (`swiglu_grid`), as torch composes them but for silu's last bits, which move a value across
    a rounding of the grid now and then."""

    from inference.models.linear import gated_mlp
    from inference.quant.kernel import swiglu_grid

    rng = np.random.default_rng(3)
    hidden, inter = 128, 256

    def weight(rows: int, cols: int):
        blocks = quantize(rng.standard_normal((rows, cols)).astype(np.float32), T.Q4_0)
        w = to_quant(blocks, T.Q4_0, rows, cols)
        return with_dense_copy(w)

    gate_up, down = weight(2 * inter, hidden), weight(hidden, inter)
    x = torch.randn(QUANT_MAX_ROWS + 8, hidden, generator=torch.Generator().manual_seed(2))
    gu = F.linear(activation_grid(x, torch.bfloat16), dequantized(gate_up).bfloat16())
    gate, up = gu.float().chunk(2, dim=-1)
    expected = activation_grid(F.silu(gate) * up, torch.bfloat16)
    got = swiglu_grid(gu)
    assert (got == expected).float().mean() > 0.99
    assert (got.float() - expected.float()).abs().max() <= 0.02 * expected.float().abs().max()
    composed = linear(F.silu(gate) * up, torch.empty(0), packed=down)
    calls = []
    monkeypatch.setattr(linear_module, "swiglu_grid", lambda t: calls.append(len(t)) or swiglu_grid(t))
    result = gated_mlp(x, torch.empty(0), torch.empty(0), gate_up, down)
    assert calls == [len(x)]
    assert (result - composed).abs().max() <= 0.01 * composed.abs().max()
    # A few rows stay in the kernel, composed as before.
    few_gate, few_up = linear(x[:4], torch.empty(0), packed=gate_up).chunk(2, dim=-1)
    few = linear(F.silu(few_gate) * few_up, torch.empty(0), packed=down)
    assert torch.equal(gated_mlp(x[:4], torch.empty(0), torch.empty(0), gate_up, down), few)
    assert len(calls) == 1


# Measured on SmolLM2 (12 prompts x 12 tokens): logprobs moved by up to 0.17 nats with bf16 copies, 0.13
# with fp32 sgemm; fused vs torch layers over 5-bit requantised weights up to 0.44 (one token of 48, with
# AVX-512 VNNI's summation order; 0.2 with AVX2's). The bounds:
NEAR_TIE = 0.25  # nats between the two best tokens, under which either may be picked
LOGPROB_DRIFT = 0.5


def _greedy_with_top2(engine, prompts: list[list[int]], params) -> list[list]:
    """Each prompt's greedy tokens with the two best logprobs at every step, all prompts in one batch."""
    ids = [f"q-{engine._arrivals + i}" for i in range(len(prompts))]
    for rid, prompt in zip(ids, prompts, strict=True):
        engine.add_request(rid, prompt, replace(params, logprobs=2))
    steps: dict[str, list] = {rid: [] for rid in ids}
    while engine.has_unfinished():
        for out in engine.step():
            steps[out.request_id].extend(out.logprobs or [])
    return [steps[rid] for rid in ids]


@pytest.fixture(scope="module")
def quantized_engine(smollm2_path, model_cache):
    from inference.config import EngineConfig
    from inference.engine import LLMEngine

    config = EngineConfig(
        smollm2_path, device="cpu", cache_dir=model_cache, speculative="off", gguf_quantized=True
    )
    return LLMEngine(config)


def _assert_greedy_agree(first: list, second: list) -> None:
    """The same tokens with logprobs within LOGPROB_DRIFT, up to the first near tie."""
    for a, b in zip(first, second, strict=True):
        # NOTE: paths that round differently (bf16 copies, fp32 sums in another order before the int8
        # grid) may pick either of two near-tied tokens; after that the texts differ.
        assert abs(a.logprob - b.logprob) < LOGPROB_DRIFT, (a, b)
        if a.token_id != b.token_id:
            gap = b.logprob - b.top.get(a.token_id, -float("inf"))
            assert gap < NEAR_TIE, (a, b)
            return


@pytest.mark.slow
def test_smollm2_quantized_greedy_outputs_agree_across_batch_sizes(quantized_engine):
    from inference.protocol import SamplingParams
    from inference.quant.kernel import QuantWeight, native_bf16

    engine = quantized_engine
    assert isinstance(engine.model.packed_head, QuantWeight)
    # Decode batches of more rows than the kernel serves take bf16 copies on CPUs that have bf16
    # (above QUANT_MAX_ROWS, or 4 with AMX), else fp32 sgemm over the weights dequantized (above the
    # uncopied limit).
    copied = engine.model.packed_head.dense is not None
    assert copied == native_bf16()
    assert all(isinstance(w, QuantWeight) for layer in engine.model.layers for w in layer.packed.values())
    # A batch just past that: its decode steps take the long-chunk path, alone each takes the kernel.
    texts = ["The capital of France is", "def fibonacci(n):", "Water boils at", "Once upon a time"]
    batch = quant_max_rows(engine.model.packed_head) + 4
    prompts = [engine.tokenizer.encode(texts[i % 4]) for i in range(batch)]
    params = SamplingParams(max_tokens=12, temperature=0, ignore_eos=True)
    together = _greedy_with_top2(engine, prompts, params)[:4]
    alone = [_greedy_with_top2(engine, [p], params)[0] for p in prompts[:4]]
    assert "Paris" in engine.tokenizer.decode([s.token_id for s in together[0]])
    for batched, single in zip(together, alone, strict=True):
        assert len(batched) == len(single) == 12
        _assert_greedy_agree(batched, single)


@pytest.mark.slow
def test_weights_kept_quantized_read_a_bf16_kv_cache_with_the_fp32_caches_outputs(
    smollm2_path, model_cache, make_engine
):
    """A CPU engine serving 4/8-bit weights keeps K/V in bf16 by default (half the bytes a long context's
    decode step reads); its greedy outputs agree with the same engine's over an fp32 cache, fused decode
    steps and prefill chunks that read a cached prefix (chunks of 16 tokens) included."""
    from inference.protocol import SamplingParams

    engines = {
        dtype: make_engine(
            smollm2_path,
            cache_dir=model_cache,
            gguf_quantized=True,
            kv_cache_dtype=dtype,
            prefill_chunk_size=16,
            kv_cache_memory_gb=0.05,
        )
        for dtype in ("auto", "float32")
    }
    for dtype, expected in (("auto", torch.bfloat16), ("float32", torch.float32)):
        assert engines[dtype].kv_dtype == expected
        assert all(cache.dtype == expected for cache in engines[dtype].runner.kv_caches)
    texts = ["The capital of France is", "def fibonacci(n):", "Water boils at", "Once upon a time"]
    tokenizer = engines["auto"].tokenizer
    prompts = [tokenizer.encode(" ".join(texts[i:] + texts[:i]) * 3) for i in range(4)]
    params = SamplingParams(max_tokens=16, temperature=0, ignore_eos=True)
    runs = [_greedy_with_top2(engine, prompts, params) for engine in engines.values()]
    for a, b in zip(*runs, strict=True):
        _assert_greedy_agree(a, b)


@pytest.fixture(scope="module")
def q5_engine(smollm2_path, model_cache):
    """SmolLM2 with its o and gate/up projections requantised to Q5_0 (as most of Qwen2.5 0.5B's
    Q4_K_M file is), through the GGUF block mapping, and its fused decode rebuilt over them."""
    from inference.config import EngineConfig
    from inference.engine import LLMEngine
    from inference.quant.decode_layer import FusedDecode

    config = EngineConfig(
        smollm2_path, device="cpu", cache_dir=model_cache, speculative="off", gguf_quantized=True
    )
    engine = LLMEngine(config)
    for layer in engine.model.layers:
        for name in ("o_proj", "gate_up_proj"):
            rows, cols = layer.packed[name].shape
            blocks = quantize(dequantized(layer.packed[name]).numpy(), T.Q5_0)
            layer.packed[name] = to_quant(blocks, T.Q5_0, rows, cols)
    engine.model.fused = FusedDecode.build(engine.model, model_cache)
    return engine


@pytest.mark.slow
@pytest.mark.parametrize("weights", ["as_loaded", "q5"])
def test_fused_decode_layers_agree_with_the_torch_layers(weights, request, monkeypatch):
    """Decode steps run every layer in one C call each (decode_layer.c); its layer equals the torch
    layer on the same input and cache up to the int8 grid, and greedy outputs agree with the torch
    path's, one sequence or several decoding together; over SmolLM2's own Q4_1 / Q8_0 weights and
    over 5-bit ones."""
    from inference.protocol import SamplingParams
    from inference.quant.decode_layer import FusedDecode

    engine = request.getfixturevalue("q5_engine" if weights == "q5" else "quantized_engine")
    if weights == "q5":
        assert engine.model.layers[0].packed["gate_up_proj"].kind == "q5"
    model, fused = engine.model, engine.model.fused
    assert fused is not None
    forward, errors = model.forward, []
    first_layer = FusedDecode(fused.lib, fused.layers[:1], fused.keep, fused.max_rows)

    def compared(input_ids, rope, kv_caches, meta):
        x = model.embed_tokens(input_ids)
        if model.fused is not None and fused.serves(x, kv_caches[0], meta):
            # Both write the same K/V for this step into layer 0's cache before attending.
            expected = model.layers[0](x.clone(), rope, kv_caches[0], meta)
            got = first_layer.run(x.clone(), rope, kv_caches[:1], meta)
            errors.append(((got - expected).abs().max() / expected.abs().max()).item())
            # Threads split rows of the weights and (token, head) pairs: each value is computed alike.
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                assert torch.equal(first_layer.run(x.clone(), rope, kv_caches[:1], meta), got)
            finally:
                torch.set_num_threads(threads)
        return forward(input_ids, rope, kv_caches, meta)

    monkeypatch.setattr(model, "forward", compared)
    texts = ["The capital of France is", "def fibonacci(n):", "Water boils at", "Once upon a time"]
    prompts = [engine.tokenizer.encode(t) for t in texts]
    params = SamplingParams(max_tokens=12, temperature=0, ignore_eos=True)
    runs = {}
    for path in ("fused", "torch"):
        model.fused = fused if path == "fused" else None
        runs[path] = [_greedy_with_top2(engine, batch, params) for batch in (prompts, prompts[:1])]
    model.fused = fused
    # NOTE: the two norms sum in another order, which moves an activation across a rounding of the
    # int8 grid now and then (measured: about half the steps, up to 0.7% of the layer's scale). Steps
    # without such a flip agree to float rounding; a wrong rope, norm, slot or scale misses at every one.
    assert len(errors) >= 22  # 11 decode steps of 4 rows and 11 of one, at least
    assert max(errors) < 0.02, errors
    assert sum(e < 1e-5 for e in errors) >= 3, errors
    assert "Paris" in engine.tokenizer.decode([s.token_id for s in runs["fused"][1][0]])
    for fused_run, torch_run in zip(runs["fused"], runs["torch"], strict=True):
        for a, b in zip(fused_run, torch_run, strict=True):
            _assert_greedy_agree(a, b)


@pytest.mark.slow
def test_auto_keeps_ggufs_quantized_above_a_size(smollm2_path, model_cache, monkeypatch):
    """The packaged SmolLM2 (538 MB in fp32) stays fp32 under "auto"; a model past the size is kept
    4/8-bit (here SmolLM2 itself, with the threshold lowered)."""
    from inference import loaders
    from inference.quant.kernel import QuantWeight

    cpu = (torch.device("cpu"), torch.float32)
    model, _ = loaders.load_model(smollm2_path, model_cache, *cpu, quantized="auto")
    assert model.packed_head is None
    monkeypatch.setattr(loaders, "AUTO_QUANTIZED_MIN_BYTES", 500 << 20)
    model, _ = loaders.load_model(smollm2_path, model_cache, *cpu, quantized="auto")
    assert isinstance(model.packed_head, QuantWeight)
