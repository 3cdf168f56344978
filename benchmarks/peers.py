"""How every benchmark peer (llama.cpp's server, vLLM) is started: at its own defaults, in an
environment of its own, on a free port, logged to a file, stopped at the end.

NOTE: a peer process gets a minimal environment, never ours. `benchmarks/engine.py` sets
`OMP_WAIT_POLICY=PASSIVE` for HF `generate`; inherited, it made llama-server sleep at every op
(31 tok/s instead of 94 for SmolLM2 on 2 cores). Only what the peer needs to run here is added, and
the benchmark records it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

KEPT = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")


def peer_env(extra: dict[str, str]) -> dict[str, str]:
    """The peer's environment: the basics of a login shell, plus `extra` (recorded by the caller)."""
    return {k: os.environ[k] for k in KEPT if k in os.environ} | extra


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(
    command: Callable[[int], list[str]], extra_env: dict[str, str], log_path: Path, ready_s: float
) -> Iterator[str]:
    """`command(port)` started with `peer_env(extra_env)`; yields its URL once /health answers."""
    port = free_port()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("w") as log:
        proc = subprocess.Popen(command(port), stdout=log, stderr=subprocess.STDOUT, env=peer_env(extra_env))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{log_path.name}: the server exited: {log_path.read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{log_path.name}: not ready in {ready_s:.0f} s: {log_path.read_text()[-3000:]}"
                )
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
