"""Settings of the in-process inference engine (see inference/README.md)."""

from typing import Literal

from pydantic import BaseModel, Field


class EngineSettings(BaseModel):
    block_size: int = Field(default=16, description="Tokens per KV-cache block.")
    kv_cache_memory_gb: float = Field(default=1.0, description="Memory budget of the KV-cache block pool.")
    max_num_seqs: int = Field(default=64, description="Most sequences running in one step.")
    max_num_batched_tokens: int = Field(default=2048, description="Token budget of one engine step.")
    prefill_chunk_size: int = Field(default=512, description="Longest prefill chunk scheduled in one step.")
    max_waiting: int = Field(default=256, description="Waiting-queue limit; beyond it requests get 503.")
    max_model_len: int | None = Field(default=None, description="Context cap (default: the model's).")
    enable_prefix_caching: bool = Field(
        default=True, description="Reuse KV-cache blocks of identical prompt prefixes across requests."
    )
    cpu_threads: int | None = Field(
        default=None,
        description="torch intra-op threads on CPU (unset: torch's default, one per core). On a machine "
        "shared with other busy processes, use fewer threads than cores, or export OMP_WAIT_POLICY=PASSIVE "
        "before starting: spinning OpenMP workers otherwise stall every small op.",
    )
    speculative: Literal["off", "prompt_lookup", "draft"] = Field(
        default="off",
        description="Speculative decoding: prompt_lookup (n-gram match against the context, no extra "
        "model) or draft (a small model sharing the tokenizer, see draft_model).",
    )
    num_speculative_tokens: int = Field(default=4, description="Most tokens proposed per step and request.")
    draft_model: str | None = Field(
        default=None, description="Path of the draft model (HF directory or .gguf) when speculative=draft."
    )
    spec_max_batch: int = Field(
        default=4, description="Speculation is off in steps with more running requests than this."
    )
    device: str = Field(default="auto", description="torch device: auto, cpu, cuda, cuda:N.")
    dtype: str = Field(default="auto", description="auto (fp32 on CPU, bf16 on CUDA), float32, bfloat16.")
    llm_base_url: str | None = Field(
        default=None, description="OpenAI-compatible server to use instead of the in-process engine."
    )
