"""Model and engine configuration, validated once at construction so the hot path never re-checks."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

import torch

from inference.attention import BACKENDS

SUPPORTED_ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}
SUPPORTED_ROPE_TYPES = {"default", "linear", "llama3"}
SPECULATIVE_METHODS = {"off", "prompt_lookup", "draft"}


@dataclass(frozen=True)
class ModelConfig:
    """The decoder-only transformer's shape, read from an HF `config.json` dict."""

    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: dict[str, Any] | None
    max_position_embeddings: int
    tie_word_embeddings: bool
    attention_bias: bool
    eos_token_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.model_type not in SUPPORTED_ARCHITECTURES:
            raise ValueError(
                f"unsupported model_type {self.model_type!r}; have {sorted(SUPPORTED_ARCHITECTURES)}"
            )
        if self.num_heads % self.num_kv_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        rope_type = (self.rope_scaling or {}).get("rope_type", "default")
        if rope_type not in SUPPORTED_ROPE_TYPES:
            raise ValueError(f"unsupported rope scaling {rope_type!r}; have {sorted(SUPPORTED_ROPE_TYPES)}")

    @classmethod
    def from_hf_dict(cls, cfg: dict[str, Any], extra_eos: list[int] | None = None) -> ModelConfig:
        # NOTE: transformers >= 5 writes `rope_parameters` (theta + scaling in one dict); older versions
        # write `rope_theta` and `rope_scaling` separately. Accept both.
        rope = dict(cfg.get("rope_parameters") or cfg.get("rope_scaling") or {})
        if "type" in rope and "rope_type" not in rope:
            rope["rope_type"] = rope.pop("type")
        theta = float(rope.pop("rope_theta", cfg.get("rope_theta", 10000.0)))
        scaling = rope if rope.get("rope_type", "default") != "default" else None
        eos = cfg.get("eos_token_id")
        eos_ids = [eos] if isinstance(eos, int) else list(eos or [])
        model_type = cfg["model_type"]
        return cls(
            model_type=model_type,
            vocab_size=cfg["vocab_size"],
            hidden_size=cfg["hidden_size"],
            intermediate_size=cfg["intermediate_size"],
            num_layers=cfg["num_hidden_layers"],
            num_heads=cfg["num_attention_heads"],
            num_kv_heads=cfg.get("num_key_value_heads") or cfg["num_attention_heads"],
            head_dim=cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"],
            rms_norm_eps=cfg.get("rms_norm_eps", 1e-6),
            rope_theta=theta,
            rope_scaling=scaling,
            max_position_embeddings=cfg.get("max_position_embeddings", 2048),
            tie_word_embeddings=cfg.get("tie_word_embeddings", False),
            # Qwen2 always has q/k/v biases; Llama has them only when `attention_bias` says so.
            attention_bias=model_type == "qwen2" or bool(cfg.get("attention_bias", False)),
            eos_token_ids=tuple(sorted(set(eos_ids + list(extra_eos or [])))),
        )


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
KV_CACHE_DTYPES = ("auto", *DTYPES)


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if name not in DTYPES:
        raise ValueError(f"unsupported dtype {name!r}; have auto, {', '.join(DTYPES)}")
    return DTYPES[name]


def resolve_kv_cache_dtype(config: EngineConfig, weights_kept_quantized: bool) -> torch.dtype:
    """The KV cache's dtype (see EngineConfig.kv_cache_dtype). NOTE: a CPU engine serving weights kept
    4/8-bit reads the cache in bf16 by default: a long context's decode step is bound by reading K/V
    (fp32 doubles that), and those weights' activations are already rounded to int8 per group."""
    if config.kv_cache_dtype == "auto":
        cpu_quantized = config.device.type == "cpu" and weights_kept_quantized
        return torch.bfloat16 if cpu_quantized else config.dtype
    dtype = DTYPES[config.kv_cache_dtype]
    if dtype != config.dtype and config.device.type != "cpu":
        raise ValueError(f"kv_cache_dtype {config.kv_cache_dtype} differs from the model's dtype: CPU only")
    return dtype


class EngineOptions(Protocol):
    """What `EngineConfig.from_settings` reads: any pydantic model (the platform's EngineSettings)."""

    def model_dump(self) -> dict[str, Any]: ...


# Option names that differ between the settings and this dataclass (settings name -> field name).
_RENAMED = {"draft_model": "draft_model_path"}


@dataclass
class EngineConfig:
    """Everything the engine needs, checked in `__post_init__`."""

    # NOTE: the engine stands alone (no import of core/), so its defaults are written here and again
    # in core/settings/engine.py; tests/inference/engine/test_config.py checks that they agree.
    model_path: Path
    block_size: int = 16
    kv_cache_memory_gb: float = 1.0
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 2048
    prefill_chunk_size: int = 512
    max_waiting: int = 256
    max_model_len: int | None = None  # None: the model's own context length
    device: torch.device = field(default_factory=lambda: resolve_device("auto"))
    dtype: torch.dtype | None = None  # None: resolved from the device
    cache_dir: Path | None = None  # where converted GGUF weights are cached; None: no cache
    enable_prefix_caching: bool = True
    cpu_threads: int | None = None  # torch intra-op threads; None: torch's setting
    thread_nice: int = 5  # niceness added to the step thread (Linux), see AsyncLLMEngine._loop
    num_kv_blocks: int | None = None  # overrides the memory budget (tests force tiny pools with it)
    speculative: str = "prompt_lookup"  # see SPECULATIVE_METHODS and inference/spec/
    num_speculative_tokens: int = 7
    draft_model_path: Path | None = None  # the draft model when speculative == "draft"
    prompt_lookup_min: int = 2  # see spec/prompt_lookup.py
    prompt_lookup_max: int = 5
    spec_max_batch: int = 4  # no speculation with more running sequences
    # Most tokens (running sequences + their guesses) a speculating step feeds; guesses are cut to fit.
    # None: `cpu_packed_rows` where the weights are packed (more rows cost much more), else no limit.
    spec_max_tokens: int | None = None
    cpu_packed_rows: int = 8  # fp32 CPU: packed for 2..this many rows; 0: off
    # GGUF 4/8-bit weights kept so (inference/quant/): True, False, or "auto" (by size, loaders/__init__.py)
    gguf_quantized: bool | str = "auto"
    # CUDA: decode steps replay CUDA graphs captured per batch size (cuda_graphs.py); True runs every
    # step eagerly. Graphs are always off on CPU and under the torch attention backend.
    enforce_eager: bool = False
    attention_backend: str = "auto"  # auto | triton | torch (see attention.py)
    # The KV cache's dtype: "auto" (bf16 on CPU engines serving weights kept quantized, else the model's
    # dtype), float32, bfloat16, float16; one other than the model's only on CPU (engine.py).
    kv_cache_dtype: str = "auto"

    def __post_init__(self) -> None:
        self.model_path = Path(self.model_path)
        if not self.model_path.exists():
            raise FileNotFoundError(f"model not found: {self.model_path}")
        self.device = torch.device(self.device)
        if self.dtype is None:
            self.dtype = resolve_dtype("auto", self.device)
        positive = (
            "block_size",
            "max_num_seqs",
            "max_num_batched_tokens",
            "prefill_chunk_size",
            "max_waiting",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0")
        if self.kv_cache_memory_gb <= 0:
            raise ValueError("kv_cache_memory_gb must be > 0")
        if self.max_model_len is not None and self.max_model_len <= 0:
            raise ValueError("max_model_len must be > 0")
        if self.cpu_threads is not None and self.cpu_threads <= 0:
            raise ValueError("cpu_threads must be > 0")
        if not 0 <= self.thread_nice <= 19:
            raise ValueError("thread_nice must be in 0..19")
        if self.num_kv_blocks is not None and self.num_kv_blocks <= 0:
            raise ValueError("num_kv_blocks must be > 0")
        if self.speculative not in SPECULATIVE_METHODS:
            raise ValueError(f"speculative must be one of {sorted(SPECULATIVE_METHODS)}")
        if not 1 <= self.prompt_lookup_min <= self.prompt_lookup_max:
            raise ValueError("need 1 <= prompt_lookup_min <= prompt_lookup_max")
        if self.spec_max_tokens is not None and self.spec_max_tokens <= 0:
            raise ValueError("spec_max_tokens must be > 0")
        if self.cpu_packed_rows < 0:
            raise ValueError("cpu_packed_rows must be >= 0")
        if self.gguf_quantized not in (True, False, "auto"):
            raise ValueError(f"gguf_quantized must be true, false or auto, got {self.gguf_quantized!r}")
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise ValueError(f"kv_cache_dtype must be one of {KV_CACHE_DTYPES}, got {self.kv_cache_dtype!r}")
        if self.attention_backend not in BACKENDS:
            raise ValueError(f"attention_backend must be one of {BACKENDS}")
        if self.num_speculative_tokens <= 0 or self.spec_max_batch < 0:
            raise ValueError("num_speculative_tokens must be > 0 and spec_max_batch >= 0")
        if self.speculative == "draft":
            if self.draft_model_path is None:
                raise ValueError("speculative='draft' needs draft_model_path")
            self.draft_model_path = Path(self.draft_model_path)
            if not self.draft_model_path.exists():
                raise FileNotFoundError(f"draft model not found: {self.draft_model_path}")

    @classmethod
    def from_settings(
        cls, settings: EngineOptions, model_path: str | Path, cache_dir: Path | None = None, **overrides: Any
    ) -> EngineConfig:
        """The engine's options out of the platform's settings: every settings field named like one of
        ours (or renamed in `_RENAMED`) is carried; the others (llm_base_url) are not the engine's."""
        names = {f.name for f in fields(cls)}
        options = {_RENAMED.get(k, k): v for k, v in settings.model_dump().items()}
        kwargs = {k: v for k, v in options.items() if k in names}
        device = resolve_device(kwargs.get("device", "auto"))
        kwargs.update(model_path=Path(model_path), cache_dir=cache_dir, device=device)
        kwargs["dtype"] = resolve_dtype(kwargs.get("dtype") or "auto", device)
        kwargs.update(overrides)
        return cls(**kwargs)
