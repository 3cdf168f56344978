"""Rotary position embeddings (HF "rotate_half" convention) with the rope scalings we support."""

from __future__ import annotations

import math
from typing import Any

import torch


def inv_frequencies(head_dim: int, theta: float, scaling: dict[str, Any] | None) -> torch.Tensor:
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim)
    rope_type = (scaling or {}).get("rope_type", "default")
    if rope_type == "linear":
        return inv_freq / scaling["factor"]
    if rope_type == "llama3":
        return _llama3(inv_freq, scaling)
    return inv_freq


def _llama3(inv_freq: torch.Tensor, s: dict[str, Any]) -> torch.Tensor:
    # Llama 3.1: keep high frequencies, divide low ones by `factor`, interpolate smoothly in between.
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old_len = s["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > old_len / low, inv_freq / factor, inv_freq)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= old_len / high) & (wavelen <= old_len / low)
    return torch.where(medium, smoothed, scaled)


class RotaryEmbedding:
    """Precomputed cos/sin tables; `lookup` is done once per step and shared by all layers."""

    def __init__(
        self,
        head_dim: int,
        max_positions: int,
        theta: float,
        scaling: dict[str, Any] | None,
        device: torch.device,
        dtype: torch.dtype,
    ) -> None:
        inv_freq = inv_frequencies(head_dim, theta, scaling)
        freqs = torch.outer(torch.arange(max_positions, dtype=torch.float32), inv_freq)
        # NOTE: rotate_half(x) * sin == roll(x, half) * signed_sin with the first half of sin negated,
        # which saves the negation and concatenation of rotate_half on every layer.
        self.cos = torch.cat((freqs.cos(), freqs.cos()), dim=-1).to(device=device, dtype=dtype)
        self.sin = torch.cat((-freqs.sin(), freqs.sin()), dim=-1).to(device=device, dtype=dtype)

    def lookup(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and signed sin as `[tokens, 1, head_dim]`, broadcastable over heads."""
        return self.cos[positions].unsqueeze(1), self.sin[positions].unsqueeze(1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """x: `[tokens, heads, head_dim]`; the tables come from `RotaryEmbedding.lookup`."""
    return torch.addcmul(x * cos, x.roll(x.shape[-1] // 2, dims=-1), signed_sin)
