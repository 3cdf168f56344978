"""The supervisor's readiness check reads postmaster.pid, which postgres writes a line at a time."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from core.embedded_pg import Supervisor

# The lines postgres writes before it appends its status, then with the status.
STARTING = [str(os.getpid()), "/data/pgdata", "1796114542", "5432", "", "", "  2220043     32820"]


@pytest.mark.parametrize(
    ("lines", "ready"),
    [
        (None, False),  # no file: stopped
        (STARTING[:3], False),  # read while postgres writes it
        (STARTING, False),
        ([*STARTING, "starting"], False),
        ([*STARTING, "ready"], True),
    ],
)
def test_running_is_true_only_for_a_complete_file_that_says_ready(tmp_path: Path, lines, ready):
    if lines is not None:
        (tmp_path / "postmaster.pid").write_text("\n".join(lines) + "\n")
    supervisor = Supervisor(SimpleNamespace(pgdata=tmp_path))
    assert supervisor.running() is ready
