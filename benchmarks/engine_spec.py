"""Speculative decoding and prefix caching in our engine (`python -m benchmarks.engine --spec`).

- Decode speed with prompt lookup vs without on RAG-style prompts whose answers quote the context
  (and, at batch 1, on RAG prompts whose answers quote almost nothing, where it cannot help):
  each section of the demo corpus (cli/demo/, what `groundwork up` ingests) as the context, and an
  instruction to quote it. Greedy, so both write the same tokens. The share of answer tokens that
  continue a 3-gram of the prompt (`copy_rate`) tells how much of the answers is quoted. One request
  at a time (decode speed = tokens after the first / time after the first), all at once (where
  `spec_max_batch` switches speculation off until few requests are left), and 4 at once (all of
  them speculating, with 1 guess each while all 4 run: `spec_max_tokens`). Both modes run on one
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
from collections.abc import Callable
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from inference.config import EngineConfig
from inference.engine import LLMEngine
from inference.protocol import SamplingParams

RESULTS = Path(__file__).parent / "results" / "engine_spec.json"
ModeParams = Callable[[bool], SamplingParams]  # a request's parameters, with speculation or without
SMALL_BATCH = 4  # spec_max_batch: the most requests that speculate together
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


def _chat(tokenizer, system: str, question: str) -> list[int]:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer.encode(rendered, add_special_tokens=False)


def quoting_prompts(tokenizer, n: int) -> list[list[int]]:
    """`n` chat prompts: a demo section as the context, and a request to quote it (questions alternate)."""
    sections = demo_sections()
    return [
        _chat(
            tokenizer,
            f"{QUOTING_SYSTEM}\n\nContext: {sections[i % len(sections)][1]}",
            QUOTING_QUESTIONS[i % len(QUOTING_QUESTIONS)].format(
                topic=sections[i % len(sections)][0].lower()
            ),
        )
        for i in range(n)
    ]


def free_form_prompts(tokenizer, n: int) -> list[list[int]]:
    """`n` chat prompts: three numbered demo sections as sources, and a question that asks for no quote."""
    sections = demo_sections()
    prompts = []
    for i in range(n):
        sources = "\n".join(f"[{j + 1}] {sections[(i + j) % len(sections)][1]}" for j in range(3))
        question = f"Explain {sections[i % len(sections)][0].lower()} in your own words."
        prompts.append(
            _chat(tokenizer, f"Answer from the numbered sources.\n\nSources:\n{sources}", question)
        )
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


def batch1_runs(engine: LLMEngine, prompts: list[list[int]], params: ModeParams) -> dict[str, dict]:
    """Each prompt alone, without and with speculation (which goes first alternates); per mode the
    decode speed (tokens after the first / time after the first), output tokens/s and the outputs."""
    runs: dict[str, list[dict]] = {"off": [], "prompt_lookup": []}
    for i, prompt in enumerate(prompts):
        for mode in list(runs)[:: 1 if i % 2 else -1]:
            runs[mode].append(timed(engine, [prompt], params(mode == "prompt_lookup")))
    return {
        mode: {
            "output_tokens": sum(r["output_tokens"] for r in done),
            "decode_tokens_per_s": sum(n for r in done for n, _ in r["decode"])
            / sum(t for r in done for _, t in r["decode"]),
            "output_tokens_per_s": sum(r["output_tokens"] for r in done) / sum(r["wall_s"] for r in done),
            "tpot_p50_s": statistics.median(r["tpot_p50_s"] for r in done),
            "token_ids": [r["token_ids"][0] for r in done],
        }
        for mode, done in runs.items()
    }


def together_runs(
    engine: LLMEngine, prompts: list[list[int]], params: ModeParams, rounds: int = 2
) -> dict[str, dict]:
    """All `prompts` at once, without and with speculation, `rounds` times in the order off, on, on,
    off: a drift in the machine's speed weighs on both alike. The process's CPU time is kept too:
    other processes' load does not show in it."""
    runs: dict[str, list[dict]] = {"off": [], "prompt_lookup": []}
    for mode in ("off", "prompt_lookup", "prompt_lookup", "off") * rounds:
        cpu = time.process_time()
        run = timed(engine, prompts, [params(mode == "prompt_lookup") for _ in prompts])
        runs[mode].append({**run, "cpu_s": time.process_time() - cpu})
    return {
        mode: {
            "output_tokens": sum(r["output_tokens"] for r in done),
            "wall_s": sum(r["wall_s"] for r in done),
            "output_tokens_per_s": sum(r["output_tokens"] for r in done) / sum(r["wall_s"] for r in done),
            "output_tokens_per_cpu_s": sum(r["output_tokens"] for r in done) / sum(r["cpu_s"] for r in done),
            "ttft_p50_s": statistics.median(r["ttft_p50_s"] for r in done),
            "tpot_p50_s": statistics.median(r["tpot_p50_s"] for r in done),
            "token_ids": [t for r in done for t in r["token_ids"]],
        }
        for mode, done in runs.items()
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
    single = batch1_runs(engine, prompts[:batch1], params)
    many = together_runs(engine, prompts[:concurrent], params)
    few = together_runs(engine, prompts[:SMALL_BATCH], params)
    results: dict = {}
    outputs: dict[str, list[list[int]]] = {}
    for mode in ("off", "prompt_lookup"):
        results[f"{mode}_batch1"] = single[mode]
        results[f"{mode}_concurrent{concurrent}"] = many[mode]
        results[f"{mode}_concurrent{SMALL_BATCH}"] = few[mode]
        outputs[mode] = [
            *single[mode].pop("token_ids"),
            *many[mode].pop("token_ids"),
            *few[mode].pop("token_ids"),
        ]
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
    # Answers that quote (almost) nothing: what speculation costs where it cannot help.
    free_prompts = free_form_prompts(engine.tokenizer, batch1)
    free = batch1_runs(engine, free_prompts, params)
    results["free_form_batch1"] = {
        "copy_rate": round(copy_rate(free_prompts, free["off"].pop("token_ids")), 3),
        "decode_speedup": round(
            free["prompt_lookup"]["decode_tokens_per_s"] / free["off"]["decode_tokens_per_s"], 3
        ),
        **{mode: {k: v for k, v in run.items() if k != "token_ids"} for mode, run in free.items()},
    }
    for label, size in (("concurrent", concurrent), ("small_batch", SMALL_BATCH)):
        on, off = results[f"prompt_lookup_concurrent{size}"], results[f"off_concurrent{size}"]
        results[f"{label}_speedup"] = round(on["output_tokens_per_s"] / off["output_tokens_per_s"], 3)
        results[f"{label}_cpu_speedup"] = round(
            on["output_tokens_per_cpu_s"] / off["output_tokens_per_cpu_s"], 3
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
    concurrent, batch1, new_tokens, repeats = (6, 2, 32, 1) if quick else (32, 12, 64, 3)
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
        f"{SMALL_BATCH} concurrent: x{decode['small_batch_speedup']}; "
        f"answers' copy rate {decode['copy_rate']}"
    )
    free = decode["free_form_batch1"]
    console.print(
        f"batch 1 decode on free-form answers (copy rate {free['copy_rate']}): x{free['decode_speedup']}"
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
