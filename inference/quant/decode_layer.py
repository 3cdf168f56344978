"""Decode steps over weights kept 4/8-bit, every layer in one C call (`decode_layer.c`).

At one row a decoder layer is a dozen small torch ops around four quantized matmuls and attention;
each op costs more to dispatch than it computes, so SmolLM2 spent more time in Python and torch's
dispatch than in the matmuls. `FusedDecode` runs all layers in one call instead, for steps whose rows
all attend through the paged path (decodes, speculative verification) and number at most
`quant_max_rows`; other steps (prefill chunks, large batches) keep the torch path. The arithmetic is
the torch path's: the same kernels on the same int8 grids, fp32 elsewhere (sums in another order).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

import torch

from inference import cpu_attention
from inference.attention import AttentionMetadata
from inference.models.linear import quant_max_rows
from inference.quant import kernel
from inference.quant.kernel import QuantWeight, compiled

SOURCE = Path(__file__).with_name("decode_layer.c")
PROJECTIONS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")


class _Weight(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in ("kind", "n", "k")] + [
        (name, ctypes.c_void_p) for name in ("q", "qh", "d", "mn", "bias")
    ]


class _Layer(ctypes.Structure):
    _fields_ = [
        *((name, ctypes.c_int64) for name in ("hidden", "heads", "kv_heads", "head_dim", "intermediate")),
        ("eps", ctypes.c_float),
        ("norm_in", ctypes.c_void_p),
        ("norm_post", ctypes.c_void_p),
        *((name, _Weight) for name in ("qkv", "o", "gate_up", "down")),
    ]


class _Step(ctypes.Structure):
    _fields_ = [
        ("rows", ctypes.c_int64),
        *((name, ctypes.c_void_p) for name in ("cos", "sin", "slots", "tables")),
        *((name, ctypes.c_int64) for name in ("width", "num_blocks", "block_size")),
        *((name, ctypes.c_void_p) for name in ("seq", "context")),
        ("kv_bf16", ctypes.c_int64),
        ("threads", ctypes.c_int64),
    ]


def _weight(w: QuantWeight, bias: torch.Tensor | None) -> _Weight:
    n, k = w.shape
    ptr = [None if t is None else t.data_ptr() for t in (w.q, w.qh, w.d, w.mn, bias)]
    return _Weight(int(w.kind[1:]), n, k, *ptr)


@dataclass
class FusedDecode:
    """The model's layers as C structs (pointers into its tensors, which it keeps alive)."""

    lib: ctypes.CDLL
    layers: list[_Layer]
    keep: list[torch.Tensor]  # the tensors the structs point into
    max_rows: int  # the most rows a step may have (as the torch path's kernel calls)

    def __post_init__(self) -> None:
        self._table = (_Layer * len(self.layers))(*self.layers)

    @classmethod
    def build(cls, model: torch.nn.Module, cache_dir: Path | None) -> FusedDecode | None:
        """For a model whose every projection is a QuantWeight (fp32 CPU, `use_quantized`); None
        where some is not or the kernel cannot be built."""
        packed = [layer.packed.get(p) for layer in model.layers for p in PROJECTIONS]
        if not all(isinstance(w, QuantWeight) for w in packed):
            return None
        lib = compiled(SOURCE, cache_dir, kernel.SOURCE, cpu_attention.SOURCE)
        if lib is None:
            return None
        p, i64 = ctypes.c_void_p, ctypes.c_int64
        lib.decode_step.argtypes = [p, i64, p, p, p]
        lib.decode_step.restype = ctypes.c_int
        cfg = model.config
        layers, keep = [], []
        for layer in model.layers:
            bias = layer.qkv_proj.bias
            norms = (layer.input_layernorm.weight.detach(), layer.post_attention_layernorm.weight.detach())
            keep += [*norms, *([] if bias is None else [bias.detach()])]
            weights = [_weight(layer.packed[p], bias if p == "qkv_proj" else None) for p in PROJECTIONS]
            dims = (cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.intermediate_size)
            eps = layer.input_layernorm.eps
            layers.append(_Layer(*dims, eps, norms[0].data_ptr(), norms[1].data_ptr(), *weights))
        return cls(lib, layers, keep, quant_max_rows(packed[0]))

    def serves(self, x: torch.Tensor, cache: torch.Tensor, meta: AttentionMetadata) -> bool:
        """A step of paged rows only (no prefill chunk), few enough for the kernel, in the C kernels'
        layouts."""
        p = meta.paged
        return (
            p is not None
            and not meta.prefills
            and x.shape[0] <= self.max_rows
            and x.device.type == "cpu"
            and x.dtype == torch.float32
            and cache.dtype in cpu_attention.KV_DTYPES
            and cache.is_contiguous()
            and cache.shape[-1] % cpu_attention.LANES == 0
            and p.block_tables.dtype == torch.int32
            and p.token_seq.dtype == p.context_lens.dtype == meta.slot_mapping.dtype == torch.int64
        )

    def run(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        kv_caches: list[torch.Tensor],
        meta: AttentionMetadata,
    ) -> torch.Tensor:
        """Every layer on `x` `[rows, hidden]` (updated in place and returned); writes this step's K/V."""
        p = meta.paged
        cos, sin = (t.contiguous() for t in rope)
        _, _, num_blocks, block_size, _ = kv_caches[0].shape
        tables = p.block_tables.contiguous()
        step = _Step(
            x.shape[0], cos.data_ptr(), sin.data_ptr(), meta.slot_mapping.data_ptr(), tables.data_ptr(),
            tables.shape[1], num_blocks, block_size, p.token_seq.data_ptr(), p.context_lens.data_ptr(),
            int(kv_caches[0].dtype == torch.bfloat16), torch.get_num_threads(),
        )  # fmt: skip
        caches = (ctypes.c_void_p * len(kv_caches))(*(c.data_ptr() for c in kv_caches))
        x = x.contiguous()
        if self.lib.decode_step(self._table, len(self.layers), ctypes.byref(step), caches, x.data_ptr()):
            raise MemoryError("the fused decode step could not allocate its scratch")
        return x
