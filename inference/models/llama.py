"""Decoder-only transformer of the Llama and Qwen2 families, over a flat batch of tokens.

Tokens of all sequences in a step are concatenated (`[num_tokens, hidden]`, no padding); attention is
the only place that knows about sequences, through `AttentionMetadata` and the paged KV cache.
Q/K/V and gate/up projections are fused into one matmul each (fewer, larger kernels per layer);
`load_weights` accepts HF parameter names and stacks them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
import torch.nn.functional as F
from torch import nn

from inference.attention import AttentionMetadata, paged_attention
from inference.config import ModelConfig
from inference.models.linear import PackedWeight, can_pack, gated_mlp, linear, pack
from inference.models.rope import apply_rope
from inference.quant.decode_layer import FusedDecode
from inference.quant.kernel import QuantWeight


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        # Normalise in fp32 like HF, whatever the model dtype.
        return F.rms_norm(x.float(), self.weight.shape, self.weight.float(), self.eps).to(x.dtype)


class DecoderLayer(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        q_size, kv_size = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
        self.qkv_proj = nn.Linear(cfg.hidden_size, q_size + 2 * kv_size, bias=cfg.attention_bias)
        self.o_proj = nn.Linear(q_size, cfg.hidden_size, bias=False)
        self.gate_up_proj = nn.Linear(cfg.hidden_size, 2 * cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        # projection name -> its weight in a faster layout: MKL-packed, or kept 4/8-bit (see linear.py)
        self.packed: dict[str, PackedWeight | QuantWeight] = {}

    def forward(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        cache: torch.Tensor,
        meta: AttentionMetadata,
    ) -> torch.Tensor:
        # NOTE: a function instead of calling the nn.Linear modules: the module call machinery costs as
        # much as a small matmul, and batch-1 decode runs 4 projections x every layer per token.
        n = x.shape[0]
        packed = self.packed.get
        qkv = linear(self.input_layernorm(x), self.qkv_proj.weight, self.qkv_proj.bias, packed("qkv_proj"))
        qkv = qkv.view(n, self.num_heads + 2 * self.num_kv_heads, self.head_dim)
        qk = apply_rope(qkv[:, : self.num_heads + self.num_kv_heads], *rope)
        q, k = qk[:, : self.num_heads], qk[:, self.num_heads :]
        v = qkv[:, self.num_heads + self.num_kv_heads :]
        attn = paged_attention(q, k, v, cache, meta)
        x = x + linear(attn.reshape(n, -1), self.o_proj.weight, packed=packed("o_proj"))
        h = self.post_attention_layernorm(x)
        weights = (self.gate_up_proj.weight, self.down_proj.weight)
        return x + gated_mlp(h, *weights, packed("gate_up_proj"), packed("down_proj"))


class LlamaForCausalLM(nn.Module):
    """Also serves Qwen2 (same graph plus Q/K/V biases, which `ModelConfig.attention_bias` turns on)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.config = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = (
            None if cfg.tie_word_embeddings else nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        )
        self.packed_head: PackedWeight | QuantWeight | None = None
        # Every layer in one C call per decode step once the projections are kept 4/8-bit (the loader
        # sets it: `FusedDecode.build`).
        self.fused: FusedDecode | None = None
        # Called between decoder layers (not inside a fused step): where the engine steps aside for
        # interactive work (inference/foreground.py); set by AsyncLLMEngine.
        self.between_layers: Callable[[], None] | None = None

    def forward(
        self,
        input_ids: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        kv_caches: list[torch.Tensor],
        meta: AttentionMetadata,
    ) -> torch.Tensor:
        """Final normalised hidden states `[num_tokens, hidden]`; `compute_logits` projects some."""
        x = self.embed_tokens(input_ids)
        if self.fused is not None and self.fused.serves(x, kv_caches[0], meta):
            return self.norm(self.fused.run(x, rope, kv_caches, meta))
        for layer, cache in zip(self.layers, kv_caches, strict=True):
            x = layer(x, rope, cache, meta)
            if self.between_layers is not None:
                self.between_layers()
        return self.norm(x)

    @property
    def kept_quantized(self) -> bool:
        """Whether projections are served from their 4/8-bit form (`use_quantized`)."""
        return isinstance(self.packed_head, QuantWeight) or any(
            isinstance(w, QuantWeight) for layer in self.layers for w in layer.packed.values()
        )

    @property
    def head_weight(self) -> torch.Tensor:
        return self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return linear(hidden, self.head_weight, packed=self.packed_head).float()

    def use_quantized(self, weights: dict[str, QuantWeight]) -> None:
        """Serve the projections named in `weights` ("layers.3.qkv_proj", "head") from their 4/8-bit
        form, dropping their fp32 copies (the tied embedding stays: lookups read it)."""
        empty = torch.empty(0)
        for name, w in weights.items():
            if name == "head":
                self.packed_head = w
                if self.lm_head is not None:
                    self.lm_head.weight = nn.Parameter(empty, requires_grad=False)
                continue
            _, i, proj = name.split(".")
            layer = self.layers[int(i)]
            layer.packed[proj] = w
            getattr(layer, proj).weight = nn.Parameter(empty, requires_grad=False)

    def pack_weights(self, rows: int) -> int:
        """Pack every projection for `rows`-row matmuls (see linear.py); the bytes the packed copies
        take, 0 where it cannot pack (not fp32 on CPU with MKL, or weights kept quantized), leaving
        the model as it was."""
        if not can_pack(self.head_weight) or isinstance(self.packed_head, QuantWeight):
            return 0
        names = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
        for layer in self.layers:
            layer.packed = {name: pack(getattr(layer, name).weight, rows) for name in names}
        self.packed_head = pack(self.head_weight, rows)
        # NOTE: a packed buffer takes what its weight takes (measured in RSS); its opaque tensor's
        # numel/element_size do not tell its size.
        weights = [
            self.head_weight,
            *(getattr(layer, name).weight for layer in self.layers for name in names),
        ]
        return sum(w.numel() * w.element_size() for w in weights)

    @torch.no_grad()
    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Copy HF-named tensors in, stacking q/k/v and gate/up; raise if any parameter is left unset."""
        params = dict(self.named_parameters())
        cfg = self.config
        q_size, kv_size = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
        fused = {
            "q_proj": ("qkv_proj", 0, q_size),
            "k_proj": ("qkv_proj", q_size, kv_size),
            "v_proj": ("qkv_proj", q_size + kv_size, kv_size),
            "gate_proj": ("gate_up_proj", 0, cfg.intermediate_size),
            "up_proj": ("gate_up_proj", cfg.intermediate_size, cfg.intermediate_size),
        }
        loaded: dict[str, int] = {}
        for hf_name, tensor in weights:
            name = hf_name.removeprefix("model.").replace("self_attn.", "").replace("mlp.", "")
            if "rotary_emb" in name or (name == "lm_head.weight" and self.lm_head is None):
                continue
            parts = name.split(".")
            if len(parts) >= 2 and parts[-2] in fused:
                target, offset, size = fused[parts[-2]]
                name = ".".join([*parts[:-2], target, parts[-1]])
                _copy(params[name].narrow(0, offset, size), tensor, hf_name)
                loaded[name] = loaded.get(name, 0) + size
            elif name in params:
                _copy(params[name], tensor, hf_name)
                loaded[name] = params[name].shape[0]
            else:
                raise KeyError(f"unexpected weight {hf_name!r}")
        missing = [n for n, p in params.items() if loaded.get(n) != p.shape[0]]
        if missing:
            raise KeyError(f"weights missing for {missing[:5]}{' ...' if len(missing) > 5 else ''}")


def _copy(dst: torch.Tensor, src: torch.Tensor, name: str) -> None:
    if dst.shape != src.shape:  # copy_ would broadcast a wrong shape silently
        raise ValueError(f"weight {name!r} has shape {tuple(src.shape)}, expected {tuple(dst.shape)}")
    dst.copy_(src)
