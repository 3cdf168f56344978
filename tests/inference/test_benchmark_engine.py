"""`python -m benchmarks.engine --quick` runs end to end and writes its figures (no speed asserted)."""

from __future__ import annotations

import json
import os

import pytest
import typer
from typer.testing import CliRunner

from benchmarks import engine as bench

pytestmark = pytest.mark.slow


def run_benchmark(*args: str) -> None:
    command = typer.Typer()
    command.command()(bench.main)
    result = CliRunner().invoke(command, list(args))
    assert result.exit_code == 0, result.output


def test_quick_benchmark_writes_all_figures(tmp_path, monkeypatch):
    out = tmp_path / "engine.quick.json"
    monkeypatch.setattr(bench, "QUICK_RESULTS", out)
    run_benchmark(*["--quick"])
    figures = json.loads(out.read_text())
    assert set(figures["runs"]) == {"hf_sequential", "hf_static_b8", "engine"}
    for run in figures["runs"].values():
        assert run["output_tokens"] == 8 * 8  # every system produced exactly N tokens per request
        assert run["output_tokens_per_s"] > 0 and run["ttft_p50_s"] <= run["ttft_p99_s"]
    assert all(value > 0 for value in figures["ratios"].values())
    # Same model, greedy: our engine writes what transformers writes.
    matching, total = map(int, figures["greedy_outputs_identical_to_hf"].split("/"))
    assert total == 8 and matching >= 7


def test_quick_features_benchmark_writes_all_figures(tmp_path, monkeypatch):
    monkeypatch.setattr(bench.engine_features, "RESULTS", tmp_path / "engine_features.json")
    run_benchmark(*["--features", "--quick"])
    figures = json.loads((tmp_path / "engine_features.quick.json").read_text())
    prefix = figures["prefix_cache_0pct_hit"]
    assert prefix["hit_rate"] == 0  # the prompts really share nothing
    assert prefix["on"]["output_tokens"] == prefix["off"]["output_tokens"] == 4 * 8
    grammar = figures["json_schema"]
    assert {"batch1_tpot_overhead", "concurrent2_tpot_overhead"} <= set(grammar)
    assert all(run["tpot_p50_s"] > 0 for run in grammar.values() if isinstance(run, dict))


def test_quick_spec_benchmark_writes_all_figures(tmp_path, monkeypatch):
    monkeypatch.setattr(bench.engine_spec, "RESULTS", tmp_path / "engine_spec.json")
    run_benchmark(*["--spec", "--quick"])
    figures = json.loads((tmp_path / "engine_spec.quick.json").read_text())
    decode = figures["decode"]
    assert decode["greedy_outputs_identical"] is True
    assert decode["prompt_lookup_spec"]["accepted"] > 0
    assert decode["free_form_batch1"]["copy_rate"] < decode["copy_rate"] <= 1  # the answers quote
    assert decode["batch1_decode_speedup"] > 0 and decode["concurrent_speedup"] > 0
    assert figures["prefix_cache"]["speedup"] > 1


def test_a_peer_gets_none_of_our_environment(monkeypatch):
    from benchmarks import llamacpp, peers

    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")  # benchmarks/engine.py sets it for HF generate
    monkeypatch.setenv("GROUNDWORK_ENGINE__CPU_THREADS", "1")
    env = peers.peer_env(llamacpp.server_env())
    assert "OMP_WAIT_POLICY" not in env and not any(k.startswith("GROUNDWORK_") for k in env)
    assert env["PATH"] == os.environ["PATH"]
    amx = any(f.startswith("amx") for f in llamacpp.cpu_flags())
    assert (env.get("LLAMA_ARG_REPACK") == "false") == amx


@pytest.mark.integration
@pytest.mark.timeout(1800)  # vLLM compiles at start-up: minutes on a busy 2-core machine
def test_quick_vllm_benchmark_writes_both_clocks_and_agreement(tmp_path, monkeypatch):
    from inference.vllm_server import VLLMNotInstalled, vllm_python

    try:
        vllm_python(bench.get_settings().engine.vllm)
    except VLLMNotInstalled as exc:
        pytest.skip(str(exc))
    monkeypatch.setattr(bench.engine_peers.vllm_peer.VLLMPeer, "results", tmp_path / "engine_vllm.json")
    run_benchmark("--vllm", "--quick")
    figures = json.loads((tmp_path / "engine_vllm.quick.json").read_text())
    assert figures["peer"] == "vLLM" and "OMP_NUM_THREADS" in figures["peer_env"]
    (model,) = figures["models"]
    assert set(model["results"]) == {"chat_32", "decode_1", "rag_1", "rag_8", "prefix_32"}
    for row in model["results"].values():
        theirs = row["vLLM"]
        assert theirs["server_decode_tokens_per_s"] > 0 and theirs["client_decode_tokens_per_s"] > 0
        assert row["ratio"] > 0
    # the single stream's median of five runs, alternating, each run's figure kept
    assert (
        len(model["results"]["decode_1"]["ours"]["runs"])
        == len(model["results"]["decode_1"]["vLLM"]["runs"])
        == 5
    )
    same, total = map(int, model["greedy_outputs_identical"].split("/"))
    assert total == 8 and model["greedy_common_prefix_share"] > 0
