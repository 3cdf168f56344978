"""GGUF tensors -> `QuantWeight`, mapped block by block.

Exact (the same weights, regrouped): Q4_0 (w = d (q - 8): d, mn = -8 d), Q4_1 (w = d q + m), Q4_K
(256-superblocks of eight 32-groups with 6-bit scales and mins: per group d = d_super * sc,
mn = -dmin * m), Q5_0 and Q5_1 (as Q4_0 / Q4_1 with q in 0..31: the nibbles as q4, the fifth bits
kept in GGUF's own word per group) and Q8_0 (int8 per 32, scale d). Requantised to int8 per 32 (error
up to half a step of 127 levels of the group's largest weight): Q5_K, Q6_K, Q8_K and the other k-quants.
Float tensors (F32, F16, BF16) are left to the fp32 path.
"""

from __future__ import annotations

import numpy as np
import torch
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

from inference.quant.kernel import GROUP, QuantWeight

FLOAT_TYPES = {T.F32, T.F16, T.BF16}


def _f16(raw: np.ndarray) -> np.ndarray:
    return raw.copy().view(np.float16).astype(np.float32).reshape(raw.shape[:-1])


def _q4(
    qs: np.ndarray, d: np.ndarray, mn: np.ndarray | None, rows: int, source: str, qh: np.ndarray | None = None
) -> QuantWeight:
    """q4, or q5 with the fifth bits `qh` (4 bytes per group, little-endian)."""

    def t(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a).reshape(rows, -1))

    d, mn = t(d.astype(np.float32)), None if mn is None else t(mn.astype(np.float32))
    if qh is None:
        return QuantWeight("q4", t(qs.astype(np.uint8)), d, mn, source)
    return QuantWeight("q5", t(qs.astype(np.uint8)), d, mn, source, qh=t(qh.copy().view("<i4")))


def _q4_k(blocks: np.ndarray, rows: int) -> QuantWeight:
    d, dmin = _f16(blocks[:, 0:2]), _f16(blocks[:, 2:4])
    s, qs = blocks[:, 4:16].astype(np.uint8), blocks[:, 16:144]
    lo, hi = s[:, 0:4], s[:, 4:8]
    sc = np.concatenate([lo & 63, (s[:, 8:12] & 0xF) | ((lo >> 6) << 4)], axis=1)
    mins = np.concatenate([hi & 63, (s[:, 8:12] >> 4) | ((hi >> 6) << 4)], axis=1)
    # Chunk c of 32 bytes: low nibbles are group 2c, high nibbles group 2c + 1.
    chunks = qs.reshape(-1, 4, 32)
    groups = np.stack([chunks & 0xF, chunks >> 4], axis=2).reshape(-1, 8, 32)
    packed = groups[:, :, :16] | (groups[:, :, 16:] << 4)
    return _q4(packed, d[:, None] * sc, -dmin[:, None] * mins, rows, "Q4_K")


def _requantize_q8(w: np.ndarray, source: str) -> QuantWeight:
    rows, k = w.shape
    g = w.reshape(rows, k // GROUP, GROUP)
    d = np.abs(g).max(axis=2) / 127
    q = np.rint(g / np.where(d == 0, 1, d)[..., None]).clip(-127, 127).astype(np.int8)
    return QuantWeight(
        "q8", torch.from_numpy(q.reshape(rows, k)), torch.from_numpy(d.astype(np.float32)), None, source
    )


def to_quant(data: np.ndarray, qtype: T, rows: int, cols: int) -> QuantWeight | None:
    """The `[rows, cols]` GGUF tensor's raw `data` as a QuantWeight; None for float tensors."""
    if qtype in FLOAT_TYPES or cols % GROUP:
        return None
    raw = np.asarray(data).reshape(-1).view(np.uint8)
    if qtype == T.Q4_0:
        b = raw.reshape(-1, 18)
        d = _f16(b[:, 0:2])
        return _q4(b[:, 2:], d, -8 * d, rows, "Q4_0")
    if qtype == T.Q4_1:
        b = raw.reshape(-1, 20)
        return _q4(b[:, 4:], _f16(b[:, 0:2]), _f16(b[:, 2:4]), rows, "Q4_1")
    if qtype == T.Q4_K:
        return _q4_k(raw.reshape(-1, 144), rows)
    if qtype == T.Q5_0:
        b = raw.reshape(-1, 22)
        return _q4(b[:, 6:], _f16(b[:, 0:2]), None, rows, "Q5_0", qh=b[:, 2:6])
    if qtype == T.Q5_1:
        b = raw.reshape(-1, 24)
        return _q4(b[:, 8:], _f16(b[:, 0:2]), _f16(b[:, 2:4]), rows, "Q5_1", qh=b[:, 4:8])
    if qtype == T.Q8_0:
        b = raw.reshape(-1, 34)
        q = b[:, 2:].copy().view(np.int8).reshape(rows, cols)
        return QuantWeight(
            "q8", torch.from_numpy(q), torch.from_numpy(_f16(b[:, 0:2]).reshape(rows, -1)), None, "Q8_0"
        )
    w = np.asarray(dequantize(data, qtype), dtype=np.float32).reshape(rows, cols)
    return _requantize_q8(w, qtype.name)


def dequantized(w: QuantWeight) -> torch.Tensor:
    """The fp32 weight `w` stands for (tests compare against it)."""
    n, k = w.shape
    if w.kind == "q8":
        return (w.q.float().view(n, -1, GROUP) * w.d[..., None]).view(n, k)
    q = w.q.view(n, -1, 16)
    q = torch.cat([q & 0xF, q >> 4], dim=2).int()
    if w.qh is not None:
        q |= (w.qh[..., None] >> torch.arange(32, dtype=torch.int32) & 1) << 4
    mn = -16 * w.d if w.mn is None else w.mn
    return (q.float() * w.d[..., None] + mn[..., None]).view(n, k)


def _rows(t: torch.Tensor | None, index: torch.Tensor) -> torch.Tensor | None:
    return None if t is None else t[index]


def take_rows(w: QuantWeight, index: torch.Tensor) -> QuantWeight:
    return QuantWeight(w.kind, w.q[index], w.d[index], _rows(w.mn, index), w.source, _rows(w.qh, index))


def _cat(parts: list[torch.Tensor | None]) -> torch.Tensor | None:
    return None if parts[0] is None else torch.cat(parts)


def cat_rows(parts: list[QuantWeight]) -> QuantWeight:
    """Stacked along n (fused q/k/v, gate/up); parts of different forms (kinds, or q5 with and without
    mn) are all requantised to q8."""
    if len({(p.kind, p.mn is None) for p in parts}) > 1:
        parts = [_requantize_q8(dequantized(p).numpy(), p.source) if p.kind != "q8" else p for p in parts]
    source = "+".join(sorted({p.source for p in parts}))
    return QuantWeight(
        parts[0].kind,
        torch.cat([p.q for p in parts]),
        torch.cat([p.d for p in parts]),
        _cat([p.mn for p in parts]),
        source,
        _cat([p.qh for p in parts]),
    )
