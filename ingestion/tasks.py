"""Celery tasks. Each task reads what it needs from the database; messages carry ids only."""

from __future__ import annotations

import os
import socket

from celery import shared_task


@shared_task(name="groundwork.health")
def health() -> dict:
    """Proves a worker consumes from the broker (used by /readyz and the tests)."""
    return {"ok": True, "pid": os.getpid(), "host": socket.gethostname()}
