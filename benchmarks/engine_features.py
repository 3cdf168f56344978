"""What prefix caching and grammars cost when they do not help (`python -m benchmarks.engine --features`).

- Prefix caching at a 0% hit rate: the same concurrent requests, whose prompts share no block, on an
  engine with prefix caching on and one with it off (targets: <= 2% lower throughput, <= 2% higher
  TPOT). Runs alternate between the two engines and each keeps its best repeat, so that load from
  other processes on a shared machine weighs on both alike; the process's own CPU time (best repeat)
  is reported too, as it is blind to that load.
- JSON-schema grammar: time per output token of requests constrained by a schema vs the same requests
  unconstrained and as long, one at a time and concurrently (target: <= 5% higher TPOT); alternating
  repeats, best of each, as above.
Writes benchmarks/results/engine_features.json (or .quick.json) and prints a table.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from benchmarks.engine_spec import PASSAGES, timed
from inference.config import EngineConfig
from inference.engine import LLMEngine
from inference.grammar import parse_structured_output
from inference.protocol import SamplingParams

RESULTS = Path(__file__).parent / "results" / "engine_features.json"
TARGETS = {
    "prefix_cache_0pct_throughput_loss": 0.02,
    "prefix_cache_0pct_tpot_overhead": 0.02,
    "json_schema_tpot_overhead": 0.05,
}
PERSON_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer"},
        "city": {"type": "string", "maxLength": 40},
        "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 4},
    },
    "required": ["name", "age", "city", "hobbies"],
    "additionalProperties": False,
}


def _engine(path: Path, cache_dir: Path | None, **overrides) -> LLMEngine:
    return LLMEngine(EngineConfig(path, device="cpu", dtype=torch.float32, cache_dir=cache_dir, **overrides))


def _summary(run: dict) -> dict:
    keys = ("output_tokens", "wall_s", "output_tokens_per_s", "ttft_p50_s", "tpot_p50_s")
    return {key: run[key] for key in keys}


def prefix_cache_overhead(
    path: Path, cache_dir: Path | None, requests: int, new_tokens: int, repeats: int
) -> dict:
    engines = {"off": _engine(path, cache_dir, enable_prefix_caching=False), "on": _engine(path, cache_dir)}
    params = SamplingParams(max_tokens=new_tokens, temperature=0.0, ignore_eos=True)
    runs: dict[str, list[dict]] = {name: [] for name in engines}
    for engine in engines.values():
        timed(engine, [engine.tokenizer.encode("warm up")], SamplingParams(max_tokens=2))
    for _ in range(repeats):
        # NOTE: fresh prompts every repeat, each opening with its own id: no block of one prompt can be
        # found in the cache, whether left by another prompt or by an earlier repeat.
        tok = engines["on"].tokenizer
        prompts = [
            tok.encode(f"Request {uuid.uuid4().hex}. {PASSAGES[i % len(PASSAGES)]} Summarise this.")
            for i in range(requests)
        ]
        for name, engine in engines.items():
            cpu = time.process_time()
            run = _summary(timed(engine, prompts, params))
            runs[name].append({**run, "cpu_s": time.process_time() - cpu})
    stats = engines["on"].stats()
    off, on = (min(runs[name], key=lambda run: run["wall_s"]) for name in ("off", "on"))
    min_cpu = {name: min(run["cpu_s"] for run in runs[name]) for name in runs}
    return {
        "off": off,
        "on": on,
        "prompt_tokens_per_request": round(stats.prefix_cache_queries_total / max(1, requests * repeats)),
        "hit_rate": stats.prefix_cache_hits_total / max(1, stats.prefix_cache_queries_total),
        "throughput_loss": round(1 - on["output_tokens_per_s"] / off["output_tokens_per_s"], 4),
        "tpot_overhead": round(on["tpot_p50_s"] / off["tpot_p50_s"] - 1, 4),
        # NOTE: CPU time of this process counts none of the other processes' load, unlike wall time.
        "min_cpu_s": min_cpu,
        "cpu_time_overhead": round(min_cpu["on"] / min_cpu["off"] - 1, 4),
    }


def json_schema_overhead(
    path: Path, cache_dir: Path | None, concurrent: int, new_tokens: int, repeats: int
) -> dict:
    engine = _engine(path, cache_dir)
    tok = engine.tokenizer
    questions = [
        "Describe a fictional person as JSON.",
        "Invent a character for a novel, as JSON.",
        "Give me a made-up user profile in JSON.",
        "Describe your best friend as a JSON object.",
    ]

    def chat(i: int) -> list[int]:
        messages = [{"role": "user", "content": questions[i % len(questions)]}]
        rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return tok.encode(rendered, add_special_tokens=False)

    schema = parse_structured_output(
        {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "person", "schema": PERSON_SCHEMA},
            }
        }
    )
    constrained = SamplingParams(max_tokens=new_tokens, temperature=0.0, structured_output=schema)
    timed(engine, [chat(0)], SamplingParams(max_tokens=2, structured_output=schema))  # compiles, warms up
    result: dict[str, dict] = {}
    workloads = (("batch1", [chat(1)]), (f"concurrent{concurrent}", [chat(i) for i in range(concurrent)]))
    for label, prompts in workloads:
        # NOTE: each unconstrained request writes as many tokens as its constrained twin (which stops
        # when its JSON is complete), so both runs decode the same batch sizes step after step.
        lengths = [len(tokens) for tokens in timed(engine, prompts, constrained)["token_ids"]]
        free = [SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True) for n in lengths]
        runs: dict[str, list[dict]] = {"without": [], "with": []}
        for i in range(repeats):  # alternating, each mode keeps its best repeat (see the module doc)
            for name in ("without", "with")[:: 1 if i % 2 == 0 else -1]:
                params = free if name == "without" else [constrained] * len(prompts)
                runs[name].append(_summary(timed(engine, prompts, params)))
        for name, done in runs.items():
            result[f"{label}_{name}"] = min(done, key=lambda run: run["tpot_p50_s"])
        result[f"{label}_tpot_overhead"] = round(
            result[f"{label}_with"]["tpot_p50_s"] / result[f"{label}_without"]["tpot_p50_s"] - 1, 4
        )
    return result


def run(path: Path, cache_dir: Path | None, quick: bool, out: Path) -> dict:
    requests, new_tokens, repeats, concurrent = (4, 8, 1, 2) if quick else (16, 32, 5, 8)
    result = {
        "workload": {
            "requests": requests,
            "new_tokens": new_tokens,
            "repeats": repeats,
            "grammar_concurrent": concurrent,
            "torch_threads": torch.get_num_threads(),
        },
        "prefix_cache_0pct_hit": prefix_cache_overhead(path, cache_dir, requests, new_tokens, repeats),
        "json_schema": json_schema_overhead(path, cache_dir, concurrent, 2 * new_tokens, repeats),
        "targets": TARGETS,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    _print(Console(), result)
    Console().print(f"written to {out}")
    return result


def _print(console: Console, result: dict) -> None:
    table = Table(title="Feature overheads (greedy, fp32 CPU)")
    for column in ("run", "tok/s", "TTFT p50", "TPOT p50"):
        table.add_column(column, justify="right" if column != "run" else "left")
    pc, js = result["prefix_cache_0pct_hit"], result["json_schema"]
    rows = [(f"prefix cache {name} (0% hits)", pc[name]) for name in ("off", "on")]
    rows += [(f"{key.replace('_', ' ')} grammar", s) for key, s in js.items() if isinstance(s, dict)]
    for name, s in rows:
        tpot = f"{s['tpot_p50_s'] * 1e3:.0f}ms"
        table.add_row(name, f"{s['output_tokens_per_s']:.1f}", f"{s['ttft_p50_s']:.2f}s", tpot)
    console.print(table)
    targets = result["targets"]
    pc_target, js_target = "prefix_cache_0pct_throughput_loss", "json_schema_tpot_overhead"
    checks = [
        ("prefix cache at 0% hits, throughput loss", pc["throughput_loss"], pc_target),
        ("prefix cache at 0% hits, TPOT overhead", pc["tpot_overhead"], "prefix_cache_0pct_tpot_overhead"),
        ("prefix cache at 0% hits, CPU time overhead", pc["cpu_time_overhead"], pc_target),
    ]
    checks += [
        (f"JSON schema TPOT overhead, {key.removesuffix('_tpot_overhead')}", value, js_target)
        for key, value in js.items()
        if key.endswith("_tpot_overhead")
    ]
    for label, value, target in checks:
        mark = "[green]ok[/]" if value <= targets[target] else "[red]above target[/]"
        console.print(f"{label}: {value:+.1%} (target <= {targets[target]:.0%}) {mark}")
    console.print(f"prefix-cache hit rate during the 0% run: {pc['hit_rate']:.1%}")
