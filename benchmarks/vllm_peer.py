"""vLLM's OpenAI server as a benchmark peer (`python -m benchmarks.engine --vllm`): the venv
`groundwork vllm install` builds, the GGUF's weights as an HF directory (vLLM casts them to bf16),
its own defaults otherwise (no --enforce-eager, prefix caching on). Its speed is cross-checked
against its own account: `vllm:request_time_per_output_token_seconds` over the workload's
requests, read from /metrics before and after.
"""

from __future__ import annotations

import json
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import httpx

from benchmarks import peers
from core.settings import get_settings
from inference.loaders.gguf_file import cached_hf_dir
from inference.vllm_server import vllm_python

NAME = "peer"
TPOT = "vllm:request_time_per_output_token_seconds"


def server_env(threads: int) -> dict[str, str]:
    """What vLLM's CPU build needs here: the thread count both systems get, its KV space, offline."""
    return {"OMP_NUM_THREADS": str(threads), "VLLM_CPU_KVCACHE_SPACE": "4", "HF_HUB_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1"}  # fmt: skip


def serving(gguf: Path, cache_dir: Path, threads: int, log_path: Path) -> AbstractContextManager[str]:
    """vLLM's server on `gguf`'s weights in bf16; yields its base URL (`VLLMNotInstalled` without
    its venv). Loading and compiling take minutes on 2 cores."""
    python, model = vllm_python(get_settings().engine.vllm), cached_hf_dir(gguf, cache_dir)

    def command(port: int) -> list[str]:
        return [
            str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
            "--served-model-name", NAME, "--dtype", "bfloat16", "--max-model-len", "4096",
            "--host", "127.0.0.1", "--port", str(port),
        ]  # fmt: skip

    return peers.serving(command, server_env(threads), log_path, ready_s=1200)


async def complete(
    client: httpx.AsyncClient, url: str, prompt: list[int], n: int
) -> tuple[list[float], list[int], dict]:
    """Stream one greedy completion of exactly `n` tokens: arrival times, token ids, no server timings
    per request (`server_decode` reads them for the whole workload)."""
    body = {
        "model": NAME, "prompt": prompt, "max_tokens": n, "temperature": 0, "ignore_eos": True,
        "stream": True, "return_token_ids": True,
    }  # fmt: skip
    times: list[float] = []
    ids: list[int] = []
    async with client.stream("POST", f"{url}/v1/completions", json=body, timeout=None) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            now = time.perf_counter()
            for choice in json.loads(line[6:]).get("choices", []):
                tokens = choice.get("token_ids") or []
                ids += tokens
                times += [now] * len(tokens)
    return times, ids, {}


def tpot_totals(url: str) -> tuple[float, float]:
    """(sum, count) of vLLM's per-request time per output token histogram."""
    total = count = 0.0
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name == f"{TPOT}_sum":
            total += float(line.rsplit(" ", 1)[1])
        elif name == f"{TPOT}_count":
            count += float(line.rsplit(" ", 1)[1])
    return total, count


def server_decode(before: tuple[float, float], after: tuple[float, float]) -> float | None:
    """Decode tok/s by vLLM's own clock over the requests between two `tpot_totals` readings."""
    total, count = after[0] - before[0], after[1] - before[1]
    return count / total if total > 0 and count else None


class VLLMPeer:
    """vLLM as `benchmarks.engine_peers`'s peer: one server per model (start-up takes minutes),
    decode speed by its own /metrics."""

    name = "vLLM"
    results = Path(__file__).parent / "results" / "engine_vllm.json"

    def __init__(self, threads: int, log_path: Path) -> None:
        self.env = server_env(threads)
        self.log_path = log_path

    def model_server(self, gguf: Path, cache_dir: Path, threads: int) -> AbstractContextManager[str]:
        return serving(gguf, cache_dir, threads, self.log_path)

    def workload_server(
        self, url: str | None, gguf: Path, threads: int, prompts: list[list[int]], n: int
    ) -> AbstractContextManager[str]:
        assert url is not None
        return nullcontext(url)

    async def complete(
        self, client: httpx.AsyncClient, url: str, prompt: list[int], n: int
    ) -> tuple[list[float], list[int], dict]:
        return await complete(client, url, prompt, n)

    def mark(self, url: str) -> tuple[float, float]:
        return tpot_totals(url)

    def own_decode(self, url: str, mark: tuple[float, float], timings: list[dict]) -> float | None:
        return server_decode(mark, tpot_totals(url))
