"""Real services for tests: embedded Postgres databases, a Redis broker, a Celery worker process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from core.settings import Settings

REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
ROOT = Path(__file__).resolve().parents[2]


def redis_reachable() -> bool:
    try:
        with socket.create_connection((REDIS_HOST, REDIS_PORT), timeout=1):
            return True
    except OSError:
        return False


def create_database(server, name: str) -> str:
    """A new empty database on the embedded server; returns its URL."""
    server.psql(f'CREATE DATABASE "{name}";')
    return server.get_uri().replace("/postgres?", f"/{name}?", 1)


def drop_database(server, name: str) -> None:
    server.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE);')


def unique_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


class WorkerProcess:
    """A real `groundwork worker` subprocess; can be killed (SIGKILL) and started again."""

    def __init__(self, settings: Settings, database_url: str, log_path: Path) -> None:
        self.settings, self.database_url, self.log_path = settings, database_url, log_path
        self.proc: subprocess.Popen | None = None

    def env(self) -> dict[str, str]:
        s = self.settings
        env = {
            **os.environ,
            "GROUNDWORK_DATABASE_URL": self.database_url,
            "GROUNDWORK_DATA_DIR": str(s.data_dir),
            "GROUNDWORK_CELERY_QUEUE": s.celery_queue,
            "GROUNDWORK_LOG_JSON": "false",
            "GROUNDWORK_CONNECTORS": s.connectors.model_dump_json(),
            "PYTHONPATH": str(ROOT),
        }
        for key, value in (("BROKER_URL", s.broker_url), ("RESULT_BACKEND", s.result_backend)):
            if value:
                env[f"GROUNDWORK_{key}"] = value
        return env

    def start(self, concurrency: int = 1) -> None:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "worker", f"--concurrency={concurrency}"],
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            start_new_session=True,  # so kill() reaches the prefork children too
        )

    def wait_ready(self, celery_app, timeout: float = 60) -> None:
        """Block until the worker has executed a health task through the broker."""
        result = celery_app.send_task("groundwork.health", queue=self.settings.celery_queue)
        try:
            result.get(timeout=timeout)
        except Exception as exc:
            raise RuntimeError(f"worker not ready; log:\n{self.log_tail()}") from exc

    def kill(self) -> None:
        """SIGKILL the worker and its children, as a crash would."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def wait_until(predicate, timeout: float, interval: float = 0.2, message: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {message}")
