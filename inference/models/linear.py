"""The model's projections (`linear`), with MKL-packed weights for few-row matmuls on CPU.

A CPU step of a few rows (a speculative verification: the last token plus its guesses; or a
handful of sequences decoding together) is bound by reading the weights, yet MKL's plain sgemm
costs about 1.5-2x a one-row step there. Weights packed once for a fixed row count
(`cblas_sgemm_pack`, reached through `torch.ops.mkl._mkl_linear`, as torch's inductor does on CPU)
bring that back to about one row's cost; fewer rows are zero-padded up to it, since the packed
kernel serves only the count it was packed for. The price is a second copy of the weights.

NOTE: packed and plain kernels sum in another order (differences ~1e-6 relative), as any change of
batch shape does; greedy outputs agree except at exact near-ties of the top two logits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from inference.quant.gguf_blocks import dequantized
from inference.quant.kernel import QuantWeight, activation_grid, has_amx, qlinear, swiglu_grid

# Most rows a quantized weight serves through our kernel (decode batches, verification); more rows go
# through a float matmul. At 8 rows the kernel measured about as fast as bf16 over the weight's dense
# copy with AVX-512 BF16 (Zen 4). With AMX tiles the copies serve from 5 rows in models whose quantized
# projections pass AMX_COPY_MIN_BYTES: a decode step of 8 sequences (2 cores, Xeon) took 83 ms in the
# kernel and 63 ms over the copies for Qwen2.5-0.5B (446 MB kept quantized), but 28 against 30 ms for
# SmolLM2 (111 MB), whose one C call per step saves more torch dispatch per weight byte.
# Without that copy (CPUs without native bf16) a long chunk dequantizes every weight for the call,
# which the kernel beats up to about QUANT_MAX_ROWS_UNCOPIED rows (SmolLM2, 2 AVX2 cores, a decode step
# of 32 rows: 308 ms in the kernel against 700 ms).
QUANT_MAX_ROWS = 8
QUANT_MAX_ROWS_AMX = 4
AMX_COPY_MIN_BYTES = 256 << 20
QUANT_MAX_ROWS_UNCOPIED = 64


@dataclass(frozen=True)
class PackedWeight:
    packed: torch.Tensor  # opaque MKL layout of `weight`
    rows: int  # the row count it was packed for


def can_pack(weight: torch.Tensor) -> bool:
    return (
        weight.device.type == "cpu"
        and weight.dtype == torch.float32
        and torch.backends.mkl.is_available()
        and hasattr(torch.ops.mkl, "_mkl_linear")
    )


def pack(weight: torch.Tensor, rows: int) -> PackedWeight:
    return PackedWeight(torch.ops.mkl._mkl_reorder_linear_weight(weight.detach(), rows), rows)


def kernel_rows(quantized_bytes: int) -> int:
    """Most rows the weights of a model whose projections take `quantized_bytes` serve through our
    kernel once they have dense copies (see QUANT_MAX_ROWS)."""
    return QUANT_MAX_ROWS_AMX if has_amx() and quantized_bytes > AMX_COPY_MIN_BYTES else QUANT_MAX_ROWS


def with_dense_copy(w: QuantWeight, rows: int = QUANT_MAX_ROWS) -> QuantWeight:
    """`w` with its bf16 copy for long chunks (CPUs with native bf16), reordered once into oneDNN's
    blocked layout. NOTE: `F.linear` over a plain bf16 weight reorders it on every call, which cost a
    quarter of a 32-row matmul's time and half of an 8-row one; the results are the same bit for bit."""
    dense = torch.ops.mkldnn._reorder_linear_weight(dequantized(w).bfloat16(), 1)
    return replace(w, dense=dense, copy_above_rows=rows)


def _dense_linear(x: torch.Tensor, w: QuantWeight) -> torch.Tensor:
    """bf16 `x` (on the activation grid) times `w`'s blocked bf16 copy, in bf16."""
    return torch.ops.mkldnn._linear_pointwise(x, w.dense, None, "none", [], "")


def quant_max_rows(w: QuantWeight) -> int:
    """Most rows `w` serves through our kernel (see QUANT_MAX_ROWS)."""
    return QUANT_MAX_ROWS_UNCOPIED if w.dense is None else w.copy_above_rows


def linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    packed: PackedWeight | QuantWeight | None = None,
) -> torch.Tensor:
    """F.linear, through `packed` for 2 up to `packed.rows` rows (one row is a matrix-vector product,
    which the plain kernel already does at memory speed); a QuantWeight (GGUF weights kept 4/8-bit, see
    inference/quant/) replaces `weight` for every row count."""
    if isinstance(packed, QuantWeight):
        if x.shape[0] <= quant_max_rows(packed):
            return qlinear(x, packed, bias)
        # NOTE: a long chunk (prefill, big decode batches) is compute-bound: a float matmul beats the
        # integer dot products, in bf16 where the CPU has it (2.5x fp32), else sgemm over the weight
        # dequantized for this call. Its activations are rounded to the kernel's int8 grid first, so a
        # row's result barely depends on its batch's size: in fp32 up to summation order, in bf16 up
        # to bf16 rounding of the products' inputs (the grid's values themselves are not all bf16).
        if packed.dense is None:
            return F.linear(activation_grid(x), dequantized(packed), bias)
        y = _dense_linear(activation_grid(x, torch.bfloat16), packed).float()
        return y if bias is None else y + bias
    rows = x.shape[0]
    if packed is None or not 1 < rows <= packed.rows:
        return F.linear(x, weight, bias)
    if rows < packed.rows:
        x = F.pad(x, (0, 0, 0, packed.rows - rows))
    return torch.ops.mkl._mkl_linear(x, packed.packed, weight, bias, packed.rows)[:rows]


def gated_mlp(
    x: torch.Tensor,
    gate_up: torch.Tensor,
    down: torch.Tensor,
    gate_up_packed: PackedWeight | QuantWeight | None = None,
    down_packed: PackedWeight | QuantWeight | None = None,
) -> torch.Tensor:
    """down(silu(gate) * up), gate and up the halves of gate_up(x), each projection as `linear` runs it.
    A long chunk over bf16 copies keeps gate_up's output in bf16 and takes the product and its int8
    grid from it in one C pass (`swiglu_grid`), skipping an fp32 copy of the layer's widest output and
    the torch ops of the product."""
    copied = all(isinstance(w, QuantWeight) and w.dense is not None for w in (gate_up_packed, down_packed))
    if copied and x.shape[0] > quant_max_rows(gate_up_packed):
        gu = _dense_linear(activation_grid(x, torch.bfloat16), gate_up_packed)
        return _dense_linear(swiglu_grid(gu), down_packed).float()
    gate, up = linear(x, gate_up, packed=gate_up_packed).chunk(2, dim=-1)
    return linear(F.silu(gate) * up, down, packed=down_packed)
