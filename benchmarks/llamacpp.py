"""llama.cpp's `llama-server` as a benchmark peer: built once from the llama-cpp-python sdist's vendored
llama.cpp (no network at build time beyond pip's index), cached under the data dir, served on a port.

The build: `pip download --no-deps --no-binary :all: llama-cpp-python`, then cmake + ninja with
GGML_NATIVE=ON, no curl, no prebuilt web UI, under `nice` (about 8 minutes on 2 idle cores).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import httpx

from benchmarks import peers
from inference.quant.kernel import cpu_flags

CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=ON", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_TOOLS=ON", "-DBUILD_SHARED_LIBS=OFF",
]  # fmt: skip


def server_binary(root: Path) -> Path:
    return root / "build" / "bin" / "llama-server"


def build(root: Path, log: callable = print) -> Path | None:
    """The cached `llama-server` under `root`, building it first if needed; None (with the reason
    logged) where it cannot be built."""
    binary = server_binary(root)
    if binary.exists():
        return binary
    missing = [tool for tool in ("cmake", "ninja", "c++") if shutil.which(tool) is None]
    if missing:
        log(f"llama.cpp peer skipped: {', '.join(missing)} not found")
        return None
    root.mkdir(parents=True, exist_ok=True)
    try:
        sdists = sorted(root.glob("llama_cpp_python-*.tar.gz"))
        if not sdists:
            log("downloading the llama-cpp-python sdist (vendors llama.cpp)")
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                 "llama-cpp-python", "-d", str(root)],
                check=True, capture_output=True,
            )  # fmt: skip
            sdists = sorted(root.glob("llama_cpp_python-*.tar.gz"))
        source = root / sdists[-1].name.removesuffix(".tar.gz")
        if not source.exists():
            with tarfile.open(sdists[-1]) as tar:
                tar.extractall(root, filter="data")
        log(f"building llama-server from {source.name} (minutes; cached in {root})")
        nice = ["nice", "-n", "10"]
        vendored = source / "vendor" / "llama.cpp"
        out = root / "build"
        cmake = [*nice, "cmake", "-S", str(vendored), "-B", str(out), "-G", "Ninja", *CMAKE_FLAGS]
        subprocess.run(cmake, check=True, capture_output=True)
        subprocess.run([*nice, "ninja", "-C", str(out), "llama-server"], check=True, capture_output=True)
    except (subprocess.CalledProcessError, OSError, tarfile.TarError) as e:
        log(f"llama.cpp peer skipped: the build failed ({e})")
        return None
    return binary if binary.exists() else None


def server_env() -> dict[str, str]:
    """What llama-server needs here beyond its defaults: with AMX, no weight repacking.

    NOTE: the GGML_NATIVE build enables llama.cpp's AMX backend on AMX CPUs, and it segfaulted in
    `ggml_backend_amx_mul_mat` at the first compute; llama.cpp's own `LLAMA_ARG_REPACK=false` keeps
    it off (a build without AMX measured the same speeds)."""
    return {"LLAMA_ARG_REPACK": "false"} if any(f.startswith("amx") for f in cpu_flags()) else {}


def serving(binary: Path, gguf: Path, threads: int, slots: int, context: int) -> AbstractContextManager[str]:
    """`llama-server` on `gguf` with `slots` parallel sequences sharing `context` tokens; yields its URL."""

    def command(port: int) -> list[str]:
        return [
            str(binary), "-m", str(gguf), "-t", str(threads), "-tb", str(threads), "-np", str(slots),
            "-c", str(context), "--port", str(port), "--host", "127.0.0.1", "--no-webui",
        ]  # fmt: skip

    return peers.serving(command, server_env(), binary.parents[2] / "llama-server.log", ready_s=300)


async def complete(
    client: httpx.AsyncClient, url: str, prompt: list[int], n: int
) -> tuple[list[float], list[int], dict]:
    """Stream one greedy completion of exactly `n` tokens; the arrival time of each token, the ids,
    and the server's own decode speed (`predicted_per_second`: without HTTP streaming). Its prompt
    cache stays at its default (on): the workloads' prompts share no prefix unless meant to."""
    body = {
        "prompt": prompt, "n_predict": n, "ignore_eos": True, "temperature": 0, "stream": True,
        "return_tokens": True,
    }  # fmt: skip
    times: list[float] = []
    ids: list[int] = []
    timings: dict = {}
    async with client.stream("POST", f"{url}/completion", json=body, timeout=None) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            now = time.perf_counter()
            tokens = event.get("tokens") or []
            ids += tokens
            times += [now] * len(tokens or ([1] if event.get("content") else []))
            if event.get("stop"):
                timings = event.get("timings") or {}
                break
    return times, ids, {"decode_tokens_per_s": timings.get("predicted_per_second")}


class LlamaCppPeer:
    """llama-server as `benchmarks.engine_peers`'s peer: one server per workload, with as many slots
    as requests and each the context it needs (its KV cache sized for the workload, as ours is
    paged); decode speed by its own per-request `timings`."""

    name = "llama.cpp"
    results = Path(__file__).parent / "results" / "engine_llamacpp.json"

    def __init__(self, binary: Path) -> None:
        self.binary = binary
        self.env = server_env()

    def model_server(self, gguf: Path, cache_dir: Path, threads: int) -> AbstractContextManager[None]:
        return nullcontext(None)

    def workload_server(
        self, url: str | None, gguf: Path, threads: int, prompts: list[list[int]], n: int
    ) -> AbstractContextManager[str]:
        longest = max(len(p) for p in prompts) + n
        return serving(self.binary, gguf, threads, len(prompts), len(prompts) * longest)

    async def complete(
        self, client: httpx.AsyncClient, url: str, prompt: list[int], n: int
    ) -> tuple[list[float], list[int], dict]:
        return await complete(client, url, prompt, n)

    def mark(self, url: str) -> None:
        return None

    def own_decode(self, url: str, mark: None, timings: list[dict]) -> float | None:
        speeds = [t["decode_tokens_per_s"] for t in timings if t.get("decode_tokens_per_s")]
        return sum(speeds) / len(speeds) if speeds else None
