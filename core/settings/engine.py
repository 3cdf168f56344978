"""Settings of the in-process inference engine (see inference/README.md)."""

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from core.settings.serving import RouterSettings, VLLMSettings


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
    thread_nice: int = Field(
        default=5,
        ge=0,
        le=19,
        description="Niceness added to the in-process engine's step thread (and the OpenMP threads it "
        "starts), on Linux: generation runs continuously while one tenant's agents work, and yields the "
        "CPU to request handling and retrieval for the others; ingestion workers sit lower still "
        "(ingestion.worker_nice). 0: same priority as the API.",
    )
    foreground_share: float = Field(
        default=0.9,
        ge=0,
        lt=1,
        description="On CPU, the in-process engine pauses between steps and layers while an answer or "
        "search retrieves (its query embedding and database work need the cores generation keeps "
        "busy), for at most this share of its time, 0.25 s at a time (inference/foreground.py): "
        "generation keeps at least 1 - share of it under a stream of searches. 0: never pauses. "
        "Lower shares run dry for a user who asks back to back (python -m benchmarks.fairness).",
    )
    speculative: Literal["off", "prompt_lookup", "draft"] = Field(
        default="prompt_lookup",
        description="Speculative decoding: prompt_lookup (n-gram match against the context, no extra "
        "model; answers that quote their sources decode ~2x faster), draft (a small model sharing the "
        "tokenizer, see draft_model) or off. Requests turn it off with num_speculative_tokens=0.",
    )
    num_speculative_tokens: int = Field(default=7, description="Most tokens proposed per step and request.")
    draft_model: str | None = Field(
        default=None, description="Path of the draft model (HF directory or .gguf) when speculative=draft."
    )
    prompt_lookup_min: int = Field(
        default=2,
        ge=1,
        description="Shortest n-gram that prompt lookup matches. 1 also guesses after single tokens: more "
        "guesses, fewer right; it pays only where verifying costs next to nothing (a GPU at low load).",
    )
    prompt_lookup_max: int = Field(default=5, ge=1, description="Longest n-gram prompt lookup matches first.")
    spec_max_batch: int = Field(
        default=4, description="Speculation is off in steps with more running requests than this."
    )
    spec_max_tokens: int | None = Field(
        default=None,
        gt=0,
        description="Most tokens (running requests plus their proposals) in a speculating step; proposals "
        "are shortened to fit. Unset: cpu_packed_rows where the weights are packed, else no limit.",
    )
    cpu_packed_rows: int = Field(
        default=8,
        ge=0,
        description="On CPU in fp32: keep a copy of the weights packed for matmuls of 2 up to this many "
        "rows (speculative verification, small decode batches), which then cost about as much as one "
        "row; doubles the weights' memory. 0 turns it off.",
    )
    gguf_quantized: bool | Literal["auto"] = Field(
        default="auto",
        description="On CPU in fp32: keep a GGUF's 4/8-bit projections quantized and multiply them with "
        "our kernel (inference/quant/), reading ~5x fewer bytes per token than fp32 (activations are "
        "rounded to int8 per 32, as llama.cpp does; its greedy outputs match llama.cpp's more often than "
        "fp32's do); perplexity within 1% of dequantised (benchmarks.engine --perplexity). Compared "
        "with llama-server and vLLM on the same weights by benchmarks/engine.py --llamacpp / --vllm. auto: "
        "kept quantized when the fp32 weights would pass 1 GB (Qwen2.5-0.5B and up), so the packaged SmolLM2 "
        "stays fp32, the precision the answer evals were measured at. False dequantizes to fp32 at load.",
    )
    device: str = Field(default="auto", description="torch device: auto, cpu, cuda, cuda:N.")
    enforce_eager: bool = Field(
        default=False, description="CUDA: run decode steps eagerly instead of replaying CUDA graphs."
    )
    attention_backend: Literal["auto", "triton", "torch"] = Field(
        default="auto",
        description="Paged attention: triton (CUDA, reads the KV cache in place), torch (gather + SDPA; "
        "CPU), or auto.",
    )
    dtype: str = Field(default="auto", description="auto (fp32 on CPU, bf16 on CUDA), float32, bfloat16.")
    kv_cache_dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        default="auto",
        description="The KV cache's dtype. auto: bf16 on CPU engines serving GGUF weights kept quantized "
        "(gguf_quantized; a long context's decode step reads K/V at half the bytes of fp32), else the "
        "model's dtype. One other than the model's dtype is CPU only.",
    )
    llm_base_url: str | None = Field(
        default=None, description="OpenAI-compatible server to use instead of the in-process engine."
    )
    backend: Literal["ours", "vllm"] = Field(
        default="ours",
        description="ours: this engine (in-process, or `replicas`); vllm: `groundwork up` starts and "
        "supervises vLLM's OpenAI server on llm_model in its own venv (see the `vllm` section).",
    )
    replicas: list[str] = Field(
        default_factory=list,
        description="Base URLs (.../v1) of several OpenAI-compatible servers (our engine, vLLM, or both) "
        "behind the prefix-aware router; `groundwork up --replicas N` fills it with N local engines.",
    )
    vllm: VLLMSettings = Field(default_factory=VLLMSettings)
    router: RouterSettings = Field(default_factory=RouterSettings)

    @model_validator(mode="after")
    def _prompt_lookup_range(self) -> "EngineSettings":
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise ValueError(
                f"prompt_lookup_min ({self.prompt_lookup_min}) is above prompt_lookup_max "
                f"({self.prompt_lookup_max})"
            )
        return self
