"""A model server as a child process: started, waited on until it answers its health route,
restarted when it dies, stopped on exit. `groundwork up` runs vLLM and engine replicas through it."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

log = logging.getLogger(__name__)


class ServerFailed(RuntimeError):
    """The server exited or did not become ready in time."""


@dataclass
class ServerSpec:
    name: str
    command: list[str]
    health_url: str
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    startup_timeout_s: float = 600.0
    max_restarts: int = 5


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


class SupervisedServer:
    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.restarts = 0
        self._proc: subprocess.Popen | None = None
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> None:
        """Start the process without waiting for it (see `wait_ready`)."""
        self.spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        out = self.spec.log_path.open("ab")
        # NOTE: its own process group, so that stopping it also stops the workers it forks (vLLM's
        # engine core), and a Ctrl-C meant for `groundwork up` reaches it only through `stop`.
        self._proc = subprocess.Popen(
            self.spec.command,
            env={**os.environ, **self.spec.env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()

    def wait_ready(self) -> None:
        deadline = time.monotonic() + self.spec.startup_timeout_s
        while not _healthy(self.spec.health_url):
            if self._proc is None or self._proc.poll() is not None:
                raise ServerFailed(f"{self.spec.name} exited during start-up:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise ServerFailed(f"{self.spec.name} not ready after {self.spec.startup_timeout_s:.0f} s")
            time.sleep(0.5)
        log.info("%s ready at %s (pid %s)", self.spec.name, self.spec.health_url, self.pid)

    def supervise(self) -> None:
        """Restart the process whenever it dies, from a daemon thread, until `stop`."""
        self._watcher = threading.Thread(target=self._watch, name=f"supervise-{self.spec.name}", daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        while not self._stopping.wait(1.0):
            if self._proc is None or self._proc.poll() is None:
                continue
            if self.restarts >= self.spec.max_restarts:
                log.error("%s died %d times; not restarting it", self.spec.name, self.restarts + 1)
                return
            self.restarts += 1
            log.warning(
                "%s exited with %s; restarting it (%d of %d)",
                self.spec.name,
                self._proc.returncode,
                self.restarts,
                self.spec.max_restarts,
            )
            self.start()
            try:
                self.wait_ready()
            except ServerFailed as exc:
                log.error("%s", exc)

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stopping.set()
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.spec.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""
