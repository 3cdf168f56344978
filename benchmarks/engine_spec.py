"""Speculative decoding and prefix caching in our engine (`python -m benchmarks.engine --spec`).

- Decode speed with prompt lookup vs without on RAG-style prompts (a context, then a question asking to
  quote it), greedy so both write the same tokens: one request at a time, and all at once (where
  `spec_max_batch` switches speculation off until few requests are left).
- TTFT of a request whose ~1k-token prefix (system prompt + context) is in the prefix cache vs one
  whose prefix is not (a fresh `cache_salt` per uncached request forces the miss).
Writes benchmarks/results/engine_spec.json (or .quick.json) and prints a table.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from inference.config import EngineConfig
from inference.engine import LLMEngine
from inference.protocol import SamplingParams

RESULTS = Path(__file__).parent / "results" / "engine_spec.json"

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


def rag_prompt(tokenizer, i: int, system: str = "Answer by quoting the context exactly.") -> list[int]:
    context = PASSAGES[i % len(PASSAGES)]
    messages = [
        {"role": "system", "content": f"{system}\n\nContext: {context}"},
        {"role": "user", "content": QUESTIONS[(i // len(PASSAGES)) % len(QUESTIONS)]},
    ]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tokenizer.encode(rendered, add_special_tokens=False)


def timed(engine: LLMEngine, prompts: list[list[int]], params: SamplingParams) -> dict:
    """Run `prompts` together to completion; throughput, TTFT and time per output token."""
    start = time.perf_counter()
    ids = [f"bench-{engine._arrivals + i}" for i in range(len(prompts))]
    for rid, prompt in zip(ids, prompts, strict=True):
        engine.add_request(rid, prompt, params)
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
        "token_ids": [tokens[rid] for rid in ids],
    }


def decode_runs(path: Path, cache_dir: Path | None, concurrent: int, batch1: int, new_tokens: int) -> dict:
    params = SamplingParams(max_tokens=new_tokens, temperature=0.0)
    results: dict[str, dict] = {}
    outputs: dict[str, list] = {}
    for method in ("off", "prompt_lookup"):
        engine = LLMEngine(
            EngineConfig(path, device="cpu", dtype=torch.float32, cache_dir=cache_dir, speculative=method)
        )
        prompts = [rag_prompt(engine.tokenizer, i) for i in range(concurrent)]
        timed(engine, [rag_prompt(engine.tokenizer, 0, "Warm up.")], SamplingParams(max_tokens=2))
        single = [timed(engine, [p], params) for p in prompts[:batch1]]
        results[f"{method}_batch1"] = {
            "output_tokens_per_s": sum(r["output_tokens"] for r in single) / sum(r["wall_s"] for r in single),
            "tpot_p50_s": statistics.median(r["tpot_p50_s"] for r in single),
        }
        many = timed(engine, prompts, params)
        outputs[method] = [r["token_ids"][0] for r in single] + many.pop("token_ids")
        results[f"{method}_concurrent{concurrent}"] = many
        stats = engine.stats()
        results[f"{method}_spec"] = {
            "proposed": stats.spec_proposed_tokens_total,
            "accepted": stats.spec_accepted_tokens_total,
            "acceptance_rate": round(stats.spec_acceptance_rate, 3),
            "mean_accepted_length": round(stats.spec_mean_accepted_length, 3),
        }
    results["greedy_outputs_identical"] = outputs["off"] == outputs["prompt_lookup"]
    return results


def ttft_runs(path: Path, cache_dir: Path | None, repeats: int) -> dict:
    engine = LLMEngine(EngineConfig(path, device="cpu", dtype=torch.float32, cache_dir=cache_dir))
    tok = engine.tokenizer
    system = "Answer from the context.\n\nContext: " + " ".join(PASSAGES * 6)
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
    concurrent, batch1, new_tokens, repeats = (4, 1, 16, 1) if quick else (32, 4, 64, 3)
    result = {
        "workload": {"concurrent": concurrent, "batch1_requests": batch1, "new_tokens": new_tokens},
        "decode": decode_runs(path, cache_dir, concurrent, batch1, new_tokens),
        "prefix_cache": ttft_runs(path, cache_dir, repeats),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    table = Table(title="Speculative decoding (prompt lookup) on RAG prompts, greedy")
    for column in ("run", "tok/s", "TPOT p50"):
        table.add_column(column, justify="right" if column != "run" else "left")
    for name, s in result["decode"].items():
        if isinstance(s, dict) and "tpot_p50_s" in s:
            table.add_row(name, f"{s['output_tokens_per_s']:.1f}", f"{s['tpot_p50_s'] * 1e3:.0f}ms")
    console.print(table)
    console.print(f"prompt lookup: {result['decode']['prompt_lookup_spec']}")
    console.print(f"greedy outputs identical: {result['decode']['greedy_outputs_identical']}")
    pc = result["prefix_cache"]
    console.print(
        f"TTFT with a {pc['prefix_tokens']}-token prefix: uncached {pc['uncached_ttft_p50_s']:.2f}s, "
        f"cached {pc['cached_ttft_p50_s']:.2f}s (x{pc['speedup']})"
    )
    console.print(f"written to {out}")
    return result
