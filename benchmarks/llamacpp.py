"""llama.cpp's `llama-server` as a benchmark peer: built once from the llama-cpp-python sdist's vendored
llama.cpp (no network at build time beyond pip's index), cached under the data dir, served on a port.

The build: `pip download --no-deps --no-binary :all: llama-cpp-python`, then cmake + ninja with
GGML_NATIVE=ON, no curl, no prebuilt web UI, under `nice` (about 8 minutes on 2 idle cores).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(binary: Path, gguf: Path, threads: int, slots: int, context: int) -> Iterator[str]:
    """`llama-server` on `gguf` with `slots` parallel sequences sharing `context` tokens; yields its URL."""
    port = _free_port()
    cmd = [
        str(binary), "-m", str(gguf), "-t", str(threads), "-tb", str(threads), "-np", str(slots),
        "-c", str(context), "--port", str(port), "--host", "127.0.0.1", "--no-webui",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama-server exited: {proc.stderr.read()[-2000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("llama-server did not become ready in 300 s")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


async def complete(
    client: httpx.AsyncClient, url: str, prompt: list[int], n: int
) -> tuple[list[float], list[int], dict]:
    """Stream one greedy completion of exactly `n` tokens; the arrival time of each token, the ids,
    and the server's own timings (`predicted_per_second`: decode speed without HTTP streaming)."""
    body = {
        "prompt": prompt, "n_predict": n, "ignore_eos": True, "temperature": 0, "stream": True,
        "cache_prompt": False, "return_tokens": True,
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
    return times, ids, timings
