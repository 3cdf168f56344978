"""`groundwork up`'s worker: started, restarted when it dies (killed, OOM), stopped with `up`.

The restart waits a little longer after each death in a row (1 s doubling to 30 s), so a worker
that cannot start does not spin; one that stayed up a minute starts the count again.
Its pid is written to `<data_dir>/worker.pid` for operators (and the tests) to find.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import threading
import time
from pathlib import Path

log = logging.getLogger("groundwork.cli")
STABLE_S = 60.0


class SupervisedWorker:
    def __init__(self, command: list[str], env: dict[str, str], pid_file: Path) -> None:
        self.command, self.env, self.pid_file = command, env, pid_file
        self.proc: subprocess.Popen | None = None
        self.restarts = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="worker-supervisor", daemon=True)

    def start(self) -> SupervisedWorker:
        self._spawn()
        self._thread.start()
        return self

    def _spawn(self) -> None:
        self.proc = subprocess.Popen(self.command, env=self.env)
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        self.pid_file.write_text(str(self.proc.pid))

    def _watch(self) -> None:
        backoff = 1.0
        while not self._stopping.is_set():
            started = time.monotonic()
            code = self.proc.wait()
            if self._stopping.is_set():
                return
            if time.monotonic() - started > STABLE_S:
                backoff = 1.0
            log.warning("worker exited (code %s); restarting in %.0f s", code, backoff)
            if self._stopping.wait(backoff):
                return
            backoff = min(30.0, backoff * 2)
            self.restarts += 1
            self._spawn()

    def stop(self, timeout: float = 20) -> None:
        self._stopping.set()
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._thread.join(timeout=5)
        self.pid_file.unlink(missing_ok=True)
