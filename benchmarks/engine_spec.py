"""Speculative decoding and prefix caching in our engine (`python -m benchmarks.engine --spec`).

- Decode speed with prompt lookup vs without on RAG-style prompts whose answers quote the context:
  each section of the demo corpus (cli/demo/, what `groundwork up` ingests) as the context, and an
  instruction to quote it. Greedy, so both write the same tokens. The share of answer tokens that
  continue a 3-gram of the prompt (`copy_rate`) tells how much of the answers is quoted. One request
  at a time (decode speed = tokens after the first / time after the first), and all at once (where
  `spec_max_batch` switches speculation off until few requests are left). Both modes run on one
  engine, request by request alternating (speculation is a per-request setting), so that load from
  other processes on a shared machine weighs on both alike.
- TTFT of a request whose 1k-token prefix (system prompt + context) is in the prefix cache vs one
  whose prefix is not (a fresh `cache_salt` per uncached request forces the miss).
Writes benchmarks/results/engine_spec.json (or .quick.json) and prints a table.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from inference.config import EngineConfig
from inference.engine import LLMEngine
from inference.protocol import SamplingParams

RESULTS = Path(__file__).parent / "results" / "engine_spec.json"
DEMO_DOCS = Path(__file__).parents[1] / "cli" / "demo"
QUOTING_SYSTEM = "Answer by quoting the context exactly."
QUOTING_QUESTIONS = ["Quote the part of the context about {topic}.", "Repeat the context word for word."]
# Short passages for the other engine benchmarks' prompts.
PASSAGES = [
    "The Groundwork ingestion pipeline splits every document into chunks of about 400 tokens with an "
    "overlap of 50 tokens. Each chunk is embedded with all-MiniLM-L6-v2 and stored in PostgreSQL.",
    "Hybrid search combines BM25 keyword scores with dense vector similarity. The two rankings are merged "
    "with reciprocal rank fusion, and the top twenty results are passed to a cross-encoder reranker.",
    "The inference engine stores keys and values in blocks of sixteen tokens. A prefix cache keyed by "
    "chained block hashes lets requests that share a system prompt skip recomputing it.",
    "Agents call tools through a JSON schema constrained decoder. A tool call that fails validation is "
    "retried once with the error message appended to the conversation.",
]
QUESTIONS = [
    "Quote the sentence of the context that answers: how is the data stored?",
    "Repeat the first sentence of the context exactly.",
    "What does the context say? Answer with a quotation.",
    "Copy the context word for word.",
]


def demo_sections() -> list[tuple[str, str]]:
    """(heading, text) of every `## ` section of the demo documents."""
    sections = []
    for doc in sorted(DEMO_DOCS.glob("*.md")):
        for part in doc.read_text().split("\n## ")[1:]:
            heading, _, body = part.partition("\n")
            sections.append((heading.strip(), " ".join(body.split())))
    return sections


def quoting_prompts(tokenizer, n: int) -> list[list[int]]:
    """`n` chat prompts: a demo section as the context, and a request to quote it (questions alternate)."""
    sections = demo_sections()
    prompts = []
    for i in range(n):
        heading, text = sections[i % len(sections)]
        question = QUOTING_QUESTIONS[i % len(QUOTING_QUESTIONS)].format(topic=heading.lower())
        messages = [
            {"role": "system", "content": f"{QUOTING_SYSTEM}\n\nContext: {text}"},
            {"role": "user", "content": question},
        ]
        rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        prompts.append(tokenizer.encode(rendered, add_special_tokens=False))
    return prompts


def copy_rate(prompts: list[list[int]], outputs: list[list[int]], n: int = 3) -> float:
    """Share of output tokens that complete an n-gram found in their prompt (how much is quoted)."""
    copied = total = 0
    for prompt, output in zip(prompts, outputs, strict=True):
        grams = {tuple(prompt[i : i + n]) for i in range(len(prompt) - n + 1)}
        seq = prompt + output
        copied += sum(
            tuple(seq[len(prompt) + j - n + 1 : len(prompt) + j + 1]) in grams for j in range(len(output))
        )
        total += len(output)
    return copied / max(1, total)


def timed(engine: LLMEngine, prompts: list[list[int]], params: SamplingParams | list[SamplingParams]) -> dict:
    """Run `prompts` together to completion; throughput, TTFT and time per output token."""
    start = time.perf_counter()
    ids = [f"bench-{uuid.uuid4().hex}" for _ in prompts]
    per_request = params if isinstance(params, list) else [params] * len(prompts)
    for rid, prompt, p in zip(ids, prompts, per_request, strict=True):
        engine.add_request(rid, prompt, p)
    times: dict[str, list[float]] = {rid: [] for rid in ids}
    tokens: dict[str, list[int]] = {rid: [] for rid in ids}
    while engine.has_unfinished():
        for out in engine.step():
            now = time.perf_counter()
            times[out.request_id] += [now] * len(out.new_token_ids)
            tokens[out.request_id] += out.new_token_ids
    wall = time.perf_counter() - start
    tpot = [(t[-1] - t[0]) / (len(t) - 1) for t in times.values() if len(t) > 1]
    return {
        "output_tokens": sum(len(t) for t in tokens.values()),
        "wall_s": wall,
        "output_tokens_per_s": sum(len(t) for t in tokens.values()) / wall,
        "ttft_p50_s": statistics.median(t[0] - start for t in times.values()),
        "tpot_p50_s": statistics.median(tpot) if tpot else float("nan"),
        # after each request's first token: (tokens, seconds)
        "decode": [(len(t) - 1, t[-1] - t[0]) for t in times.values()],
        "token_ids": [tokens[rid] for rid in ids],
    }


def decode_runs(path: Path, cache_dir: Path | None, concurrent: int, batch1: int, new_tokens: int) -> dict:
    engine = LLMEngine(
        EngineConfig(
            path, device="cpu", dtype=torch.float32, cache_dir=cache_dir, speculative="prompt_lookup"
        )
    )

    def params(spec: bool) -> SamplingParams:
        # A fresh salt per request: neither mode may find the other's prompt in the prefix cache.
        return SamplingParams(
            max_tokens=new_tokens,
            temperature=0.0,
            num_speculative_tokens=None if spec else 0,
            cache_salt=uuid.uuid4().hex,
        )

    prompts = quoting_prompts(engine.tokenizer, max(concurrent, batch1))
    timed(engine, prompts[:1], SamplingParams(max_tokens=4, cache_salt="warm-up"))
    modes = {"off": False, "prompt_lookup": True}
    single: dict[str, list[dict]] = {mode: [] for mode in modes}
    for i, prompt in enumerate(prompts[:batch1]):
        for mode in list(modes)[:: 1 if i % 2 else -1]:  # alternate which mode goes first
            single[mode].append(timed(engine, [prompt], params(modes[mode])))
    # All at once, twice in the order off, on, on, off: a drift in the machine's speed weighs on both
    # alike. The process's CPU time is kept too: other processes' load does not show in it.
    many: dict[str, list[dict]] = {mode: [] for mode in modes}
    for mode in ("off", "prompt_lookup", "prompt_lookup", "off") * 2:
        cpu = time.process_time()
        run = timed(engine, prompts[:concurrent], [params(modes[mode]) for _ in range(concurrent)])
        many[mode].append({**run, "cpu_s": time.process_time() - cpu})
    results: dict = {}
    outputs: dict[str, list[list[int]]] = {}
    for mode in modes:
        runs = single[mode]
        decode_tokens = sum(n for run in runs for n, _ in run["decode"])
        decode_s = sum(s for run in runs for _, s in run["decode"])
        results[f"{mode}_batch1"] = {
            "output_tokens": sum(run["output_tokens"] for run in runs),
            "decode_tokens_per_s": decode_tokens / decode_s,
            "output_tokens_per_s": sum(r["output_tokens"] for r in runs) / sum(r["wall_s"] for r in runs),
            "tpot_p50_s": statistics.median(r["tpot_p50_s"] for r in runs),
        }
        both = many[mode]
        results[f"{mode}_concurrent{concurrent}"] = {
            "output_tokens": sum(r["output_tokens"] for r in both),
            "wall_s": sum(r["wall_s"] for r in both),
            "output_tokens_per_s": sum(r["output_tokens"] for r in both) / sum(r["wall_s"] for r in both),
            "output_tokens_per_cpu_s": sum(r["output_tokens"] for r in both) / sum(r["cpu_s"] for r in both),
            "ttft_p50_s": statistics.median(r["ttft_p50_s"] for r in both),
            "tpot_p50_s": statistics.median(r["tpot_p50_s"] for r in both),
        }
        outputs[mode] = [r["token_ids"][0] for r in runs] + [t for r in both for t in r["token_ids"]]
    stats = engine.stats()
    results["prompt_lookup_spec"] = {
        "proposed": stats.spec_proposed_tokens_total,
        "accepted": stats.spec_accepted_tokens_total,
        "acceptance_rate": round(stats.spec_acceptance_rate, 3),
        "mean_accepted_length": round(stats.spec_mean_accepted_length, 3),
        "num_speculative_tokens": engine.config.num_speculative_tokens,
    }
    results["copy_rate"] = round(copy_rate(prompts[:batch1], outputs["off"][:batch1]), 3)
    results["greedy_outputs_identical"] = outputs["off"] == outputs["prompt_lookup"]
    on, off = results["prompt_lookup_batch1"], results["off_batch1"]
    results["batch1_decode_speedup"] = round(on["decode_tokens_per_s"] / off["decode_tokens_per_s"], 3)
    many_on, many_off = (
        results[f"prompt_lookup_concurrent{concurrent}"],
        results[f"off_concurrent{concurrent}"],
    )
    results["concurrent_speedup"] = round(many_on["output_tokens_per_s"] / many_off["output_tokens_per_s"], 3)
    results["concurrent_cpu_speedup"] = round(
        many_on["output_tokens_per_cpu_s"] / many_off["output_tokens_per_cpu_s"], 3
    )
    return results


def ttft_runs(path: Path, cache_dir: Path | None, repeats: int) -> dict:
    engine = LLMEngine(EngineConfig(path, device="cpu", dtype=torch.float32, cache_dir=cache_dir))
    tok = engine.tokenizer
    system = "Answer from the context.\n\nContext:"
    while len(tok.encode(system)) < 1000:  # the target is set for a 1k-token prefix
        system += " " + " ".join(PASSAGES)
    prefix_tokens = len(tok.encode(system))

    def ttft(i: int, salt: str) -> float:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": QUESTIONS[i % 4]}]
        rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        prompt = tok.encode(rendered + f" ({i})", add_special_tokens=False)
        params = SamplingParams(max_tokens=1, temperature=0.0, cache_salt=salt)
        return timed(engine, [prompt], params)["ttft_p50_s"]

    timed(engine, [tok.encode("warm up")], SamplingParams(max_tokens=1))
    uncached = [ttft(i, f"fresh-{i}") for i in range(repeats)]
    ttft(0, "shared")  # fills the cache for the shared salt
    cached = [ttft(i + 1, "shared") for i in range(repeats)]
    return {
        "prefix_tokens": prefix_tokens,
        "uncached_ttft_p50_s": statistics.median(uncached),
        "cached_ttft_p50_s": statistics.median(cached),
        "speedup": round(statistics.median(uncached) / statistics.median(cached), 2),
    }


def run(path: Path, cache_dir: Path | None, quick: bool, out: Path) -> dict:
    console = Console()
    concurrent, batch1, new_tokens, repeats = (4, 2, 32, 1) if quick else (32, 12, 64, 3)
    result = {
        "workload": {"concurrent": concurrent, "batch1_requests": batch1, "new_tokens": new_tokens},
        "decode": decode_runs(path, cache_dir, concurrent, batch1, new_tokens),
        "prefix_cache": ttft_runs(path, cache_dir, repeats),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    decode = result["decode"]
    table = Table(title="Speculative decoding (prompt lookup) on RAG prompts quoting the context, greedy")
    for column in ("run", "decode tok/s", "output tok/s", "TPOT p50"):
        table.add_column(column, justify="right" if column != "run" else "left")
    for name, s in decode.items():
        if isinstance(s, dict) and "tpot_p50_s" in s:
            rate = f"{s['decode_tokens_per_s']:.1f}" if "decode_tokens_per_s" in s else ""
            table.add_row(name, rate, f"{s['output_tokens_per_s']:.1f}", f"{s['tpot_p50_s'] * 1e3:.0f}ms")
    console.print(table)
    console.print(
        f"batch 1 decode: x{decode['batch1_decode_speedup']} (target >= 1.8); {concurrent} concurrent: "
        f"x{decode['concurrent_speedup']} (target >= 1; per CPU second x{decode['concurrent_cpu_speedup']}); "
        f"answers' copy rate {decode['copy_rate']}"
    )
    console.print(f"prompt lookup: {decode['prompt_lookup_spec']}")
    console.print(f"greedy outputs identical: {decode['greedy_outputs_identical']}")
    pc = result["prefix_cache"]
    console.print(
        f"TTFT with a {pc['prefix_tokens']}-token prefix: uncached {pc['uncached_ttft_p50_s']:.2f}s, "
        f"cached {pc['cached_ttft_p50_s']:.2f}s (x{pc['speedup']})"
    )
    console.print(f"written to {out}")
    return result
