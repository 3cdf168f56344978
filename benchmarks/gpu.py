"""The engine on one CUDA GPU against transformers, with no model files (random weights, real shapes).

    python -m benchmarks.gpu [--quick] [--out benchmarks/results/gpu.json]

1. Parity: our logits against transformers' on the same weights, fp32 and bf16, through every
   attention path (prefill, chunked prefill, verification-size chunks, eager decode, graph decode).
2. Greedy equality: outputs of a plain run equal those with graphs off, chunked prefill, preemption,
   prefix-cache hits and prompt lookup; no block leaks after each.
3. Throughput (bf16, 512-token random prompts, 128 new tokens each, greedy, wall time including
   prefill): ours at batch 1, 32 and 128 (continuous batching: all submitted at once) against
   transformers `generate` at 1 and 32, eager and with the static cache (which transformers compiles
   with CUDA graphs), all in the same run.
4. Which attention kernels ran (profiler names).

Prints one table and writes JSON. `--quick`: the SmolLM2 shape only and fewer tokens (a smoke test).
"""

from __future__ import annotations

import json
import logging
import platform
import shutil
import time
from pathlib import Path
from typing import Any

import torch
import transformers
import typer
from rich.console import Console
from rich.table import Table

from benchmarks import gpu_checks
from benchmarks.gpu_models import SHAPES, make_checkpoint
from inference.protocol import SamplingParams

RESULTS = Path(__file__).parent / "results" / "gpu.json"
TARGETS = {
    "bs1_vs_hf_compiled": 2.0,
    "bs1_tok_s": 200.0,
    "bs32_vs_hf_compiled": 1.0,
    "bs128_vs_hf_compiled_bs32": 1.5,
}
console = Console(width=160)


def _random_prompts(n: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (n, length), generator=g).tolist()


def hf_tok_s(model, prompts: list[list[int]], new_tokens: int, static: bool) -> float:
    """transformers `generate`, greedy, exactly `new_tokens` each; the first call warms up (compiles)."""
    ids = torch.tensor(prompts, device="cuda")
    kwargs: dict[str, Any] = dict(
        attention_mask=torch.ones_like(ids),
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        do_sample=False,
        pad_token_id=0,
    )
    if static:
        kwargs["cache_implementation"] = "static"
    with torch.inference_mode():
        model.generate(ids, **{**kwargs, "max_new_tokens": new_tokens if static else 4, "min_new_tokens": 4})
        torch.cuda.synchronize()
        began = time.perf_counter()
        out = model.generate(ids, **kwargs)
        torch.cuda.synchronize()
    assert out.shape[1] == ids.shape[1] + new_tokens
    return len(prompts) * new_tokens / (time.perf_counter() - began)


def ours_tok_s(engine, prompts: list[list[int]], new_tokens: int) -> float:
    params = SamplingParams(max_tokens=new_tokens, temperature=0.0, ignore_eos=True)
    began = time.perf_counter()
    outs = engine.generate(prompts, params)
    elapsed = time.perf_counter() - began
    assert all(len(tokens) == new_tokens for tokens, _, _ in outs)
    return len(prompts) * new_tokens / elapsed


def ours_throughput(shape: str, path: Path, prompt_len: int, new_tokens: int) -> dict[str, float]:
    vocab = SHAPES[shape]["vocab_size"]
    tps: dict[str, float] = {}
    engine = gpu_checks.engine_for(
        path,
        torch.bfloat16,
        kv_cache_memory_gb=8.0,
        max_num_seqs=128,
        max_num_batched_tokens=8192,
        max_model_len=4096,
    )
    ours_tok_s(engine, _random_prompts(4, 64, vocab, 9), 8)  # warm-up
    for bs in (1, 32, 128):
        tps[f"ours_bs{bs}"] = ours_tok_s(engine, _random_prompts(bs, prompt_len, vocab, bs), new_tokens)
        _log(f"{shape}: ours bs {bs}: {tps[f'ours_bs{bs}']:.0f} tok/s")
    engine.block_manager.check_all_free()
    del engine
    torch.cuda.empty_cache()
    return tps


def hf_throughput(shape: str, hf_fp32, prompt_len: int, new_tokens: int) -> dict[str, float]:
    vocab = SHAPES[shape]["vocab_size"]
    tps: dict[str, float] = {}
    hf = hf_fp32.to(torch.bfloat16)
    for static in (False, True):
        for bs in (1, 32):
            name = f"hf_{'compiled' if static else 'eager'}_bs{bs}"
            try:
                tps[name] = hf_tok_s(hf, _random_prompts(bs, prompt_len, vocab, 100 + bs), new_tokens, static)
            except Exception:  # a failing baseline must not hide our figures
                logging.exception("%s: %s failed", shape, name)
                tps[name] = float("nan")
            _log(f"{shape}: {name}: {tps[name]:.0f} tok/s")
    return tps


def _ratios(tps: dict[str, float]) -> dict[str, float]:
    return {
        "bs1_vs_hf_compiled": tps["ours_bs1"] / tps["hf_compiled_bs1"],
        "bs1_tok_s": tps["ours_bs1"],
        "bs32_vs_hf_compiled": tps["ours_bs32"] / tps["hf_compiled_bs32"],
        "bs128_vs_hf_compiled_bs32": tps["ours_bs128"] / tps["hf_compiled_bs32"],
    }


def _section(report: dict[str, Any], shape: str, name: str, fn, *args: Any) -> None:
    """Run one group of checks; an exception fails that group only."""
    try:
        checks = fn(*args)
    except Exception as e:
        logging.exception("%s: %s failed", shape, name)
        checks = [{"check": name, "error": repr(e), "passed": False}]
    report["checks"] += [{"shape": shape, **c} for c in checks]
    _log(f"{shape}: {name} done")


_START = time.perf_counter()


def _log(message: str) -> None:
    console.print(f"[{time.perf_counter() - _START:6.1f}s] {message}")


def main(
    quick: bool = typer.Option(False, help="SmolLM2 shape only, 64-token outputs: a smoke test."),
    out: Path = typer.Option(RESULTS, help="Where the JSON goes."),
) -> None:
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    if not torch.cuda.is_available():
        raise typer.BadParameter("benchmarks.gpu needs a CUDA GPU")
    shapes = ["smollm2-135m"] if quick else list(SHAPES)
    new_tokens = 64 if quick else 128
    report: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "prompt_tokens": 512,
        "new_tokens": new_tokens,
        "checks": [],
        "throughput": {},
        "ratios": {},
        "targets": TARGETS,
    }
    # Our side (checks, then our speed) for every shape first, transformers' baselines last: their
    # compilation takes most of the run, so a run cut short still has every check.
    models = {}
    for shape in shapes:
        path, hf = make_checkpoint(shape)
        models[shape] = hf
        _log(f"{shape}: checkpoint at {path}")
        try:
            for dtype in (torch.float32, torch.bfloat16):
                _section(report, shape, f"parity {dtype}", gpu_checks.parity, path, hf, dtype)
            if shape == shapes[0]:
                vocab = SHAPES[shape]["vocab_size"]
                for dtype in (torch.float32, torch.bfloat16):
                    _section(report, shape, f"equality {dtype}", gpu_checks.equality, path, dtype, vocab)
                report["attention_kernels"] = gpu_checks.attention_kernels(path)
            report["throughput"][shape] = ours_throughput(shape, path, 512, new_tokens)
        except Exception as e:  # report what was measured so far
            logging.exception("%s failed", shape)
            report["checks"].append({"shape": shape, "check": "run", "error": repr(e), "passed": False})
        finally:
            shutil.rmtree(path, ignore_errors=True)
            torch.cuda.empty_cache()
        _write(report, out)
    for shape, hf in models.items():
        report["throughput"].setdefault(shape, {}).update(hf_throughput(shape, hf, 512, new_tokens))
        if "ours_bs1" in report["throughput"][shape]:
            report["ratios"][shape] = _ratios(report["throughput"][shape])
        _write(report, out)
    report["all_checks_passed"] = all(c["passed"] for c in report["checks"])
    report["targets_met"] = {
        shape: {k: v >= TARGETS[k] for k, v in r.items()} for shape, r in report["ratios"].items()
    }
    report["wall_s"] = time.perf_counter() - _START
    _write(report, out)
    _print(report)


def _write(report: dict[str, Any], out: Path) -> None:
    """After each stage: the figures so far survive a run cut short."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))


def _print(report: dict[str, Any]) -> None:
    checks = Table(title="Correctness")
    for col in ("shape", "check", "result", "passed"):
        checks.add_column(col)
    for c in report["checks"]:
        detail = {k: v for k, v in c.items() if k not in ("check", "passed", "shape")}
        shown = ", ".join(f"{k}={v:.2e}" if isinstance(v, float) else f"{k}={v}" for k, v in detail.items())
        checks.add_row(c["shape"], c["check"], shown, "yes" if c["passed"] else "NO")
    console.print(checks)
    title = f"tok/s, bf16, 512-token prompts, {report['new_tokens']} new tokens ({report['gpu']})"
    table = Table(title=title)
    cols = ["ours_bs1", "hf_eager_bs1", "hf_compiled_bs1", "ours_bs32", "hf_eager_bs32", "hf_compiled_bs32"]
    cols.append("ours_bs128")
    for col in ["shape", *cols, *TARGETS]:
        table.add_column(col.replace("_", " "), justify="right")
    for shape, tps in report["throughput"].items():
        if shape not in report["ratios"]:
            continue
        ratios = report["ratios"][shape]
        met = report["targets_met"][shape]
        cells = [f"{ratios[k]:.2f}{'' if met[k] else ' (miss)'}" for k in TARGETS]
        table.add_row(shape, *(f"{tps[c]:,.0f}" for c in cols), *cells)
    console.print(table)
    console.print(f"attention kernels: {report.get('attention_kernels')}")
    console.print(f"all checks passed: {report['all_checks_passed']}; wall {report['wall_s']:.0f} s")


if __name__ == "__main__":
    typer.run(main)
