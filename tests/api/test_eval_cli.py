"""`groundwork eval ...` against the API (in-process TestClient) and the real worker."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import cli.eval
from cli.main import app
from tests.api.test_eval_recovery import _dataset
from tests.api.test_ingest_cli import _Unclosed

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _folder(tmp_path):
    folder = tmp_path / "tiny"
    for _, (name, data) in _dataset():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


def test_eval_commands(client, celery_worker, tmp_path, monkeypatch):
    monkeypatch.setattr(cli.eval, "make_client", lambda *_: _Unclosed(client))
    folder, report = _folder(tmp_path), tmp_path / "report.json"
    args = ["eval", "retrieval", "--dataset", str(folder), "--max-queries", "8", "--output", str(report)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    modes = json.loads(report.read_text())["modes"]
    assert set(modes) == {"bm25", "dense", "hybrid"}
    assert all(m["items"] == 8 and m["latency_ms_p50"] > 0 for m in modes.values())
    assert modes["bm25"]["mrr@10"] == 1.0  # each query names its note number

    plot, out = tmp_path / "pareto.svg", tmp_path / "sweep.json"
    args = ["eval", "sweep", str(folder), "--set", "fusion.method=rrf,convex", "--max-items", "8"]
    result = CliRunner().invoke(
        app, [*args, "--collection-name", "cli-evals", "--plot", str(plot), "--output", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "Pareto front" in result.output and b"<svg" in plot.read_bytes()
    sweep_id = json.loads(out.read_text())["id"]
    result = CliRunner().invoke(app, ["eval", "apply", sweep_id, "--variant", "fusion.method=convex"])
    assert result.exit_code == 0 and "convex" in result.output, result.output
    assert client.get("/v1/collections/cli-evals").json()["retrieval"]["fusion"]["method"] == "convex"

    first = json.loads(report.read_text())["run_id"]
    result = CliRunner().invoke(app, ["eval", "compare", first, sweep_id])
    assert result.exit_code == 0 and "paired bootstrap" in result.output, result.output
    result = CliRunner().invoke(app, ["eval", "show", sweep_id, "--items", "2"])
    assert result.exit_code == 0 and "succeeded" in result.output, result.output
    result = CliRunner().invoke(app, ["eval", "run", "--server-path", "../nope"])
    assert result.exit_code == 2 and "no dataset" in result.output
