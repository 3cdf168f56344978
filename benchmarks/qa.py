"""Question answering under load: `python -m benchmarks.qa [--concurrency 20] [--max-tokens 64]`.

Starts the platform as a user would (`groundwork up` on a fresh data dir: embedded Postgres, the
database broker, a worker, the API, the demo corpus), then sends the demo questions to /v1/ask, all
at once, and reports the latency breakdown per stage (retrieval, rerank, TTFT, total; `client`: what
the client waited, admission's 503 + Retry-After refusals retried) p50/p99 and the prefix-cache hit
rate of the answers' prompts. Writes benchmarks/results/qa.json and a table.

- `--backend vllm`: the platform on the vLLM server it supervises (`groundwork vllm install` first).
- `--replicas N --routing prefix,round_robin`: `groundwork up --replicas N` once per routing policy
  (fresh engines each time), one table each and the ratio of their prefix-cache hit rates, beside
  the best any router could reach on these prompts (one cache holding every earlier prompt).
- `--env GROUNDWORK_X=V` (repeatable): a setting for the platform, to compare two in one session.
- `--kill-replica-after S`: SIGKILL one replica S seconds into the measured run; reports the answers
  lost and the requests the router sent to another replica before they had started streaming.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
from rich.console import Console
from rich.table import Table

from cli.demo import DEMO_COLLECTION

RESULTS = Path(__file__).parent / "results" / "qa.json"
ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = [
    "How many tokens does a KV cache block hold by default?",
    "What does the scheduler do at every step?",
    "How large are the chunks of a long prompt prefilled at once?",
    "Which endpoints does the engine's API serve?",
    "What is reused by prefix caching?",
    "Which model does Groundwork generate text with by default?",
    "What are the stages a document moves through during ingestion?",
    "What happens to a corrupt PDF during ingestion?",
    "How large are the default chunks and how much do they overlap?",
    "What happens when a changed document is uploaded again?",
    "What happens if a worker dies in the middle of a job?",
    "Which BM25 variant is used by default, with which parameters?",
    "Which constant does Reciprocal Rank Fusion use by default?",
    "How many dimensions do the all-MiniLM-L6-v2 vectors have?",
    "What does the HNSW index cover?",
    "Which rerankers can re-order the candidates?",
    "Where does Groundwork store everything durable?",
    "What happens without a configured database URL?",
    "Which file types can be ingested?",
    "How are answers cited?",
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_platform(
    data_dir: Path, port: int, settings_env: dict[str, str] | None = None, up_args: list[str] | None = None
) -> subprocess.Popen:
    """`groundwork up` on `data_dir`: the caller's GROUNDWORK_* variables dropped, `settings_env` set."""
    env = (
        {k: v for k, v in os.environ.items() if not k.startswith("GROUNDWORK_")}
        | (settings_env or {})
        | {
            "GROUNDWORK_DATA_DIR": str(data_dir),
            "GROUNDWORK_API_PORT": str(port),
            "GROUNDWORK_CELERY_QUEUE": f"bench-qa-{port}",
            "GROUNDWORK_LOG_LEVEL": "WARNING",
        }
    )
    log = (data_dir / "up.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "up", *(up_args or [])], env=env, cwd=ROOT, stdout=log, stderr=log
    )
    deadline = time.monotonic() + 900
    while "Try:" not in (data_dir / "up.log").read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("groundwork up failed:\n" + (data_dir / "up.log").read_text()[-3000:])
        time.sleep(1)
    return proc


async def ask_all(
    base_url: str, questions: list[str], max_tokens: int, strict: bool = True
) -> tuple[list[dict], float]:
    """The answers (with `strict` off, a failed ask is {"error": ...} instead of raising) and wall time."""
    # NOTE: no kept-alive connections: one reused as the server closes it after a Retry-After sleep
    # fails with ReadError before the request was read.
    limits = httpx.Limits(max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=base_url, timeout=600, limits=limits) as client:

        async def one(question: str) -> dict:
            body = {
                "collection": DEMO_COLLECTION,
                "question": question,
                "generation": {"max_tokens": max_tokens},
            }
            sent, refused = time.perf_counter(), 0
            try:
                # As a client should: an answer refused by admission (503 + Retry-After) is asked again.
                while (response := await client.post("/v1/ask", json=body)).status_code == 503 and (
                    "Retry-After" in response.headers
                ):
                    refused += 1
                    await asyncio.sleep(float(response.headers["Retry-After"]))
                response.raise_for_status()
            except httpx.HTTPError as exc:
                if strict:
                    raise
                return {"error": f"{type(exc).__name__}: {exc}"}
            return response.json() | {"client_ms": 1000 * (time.perf_counter() - sent), "refused": refused}

        start = time.perf_counter()
        answers = await asyncio.gather(*(one(q) for q in questions))
        return list(answers), time.perf_counter() - start


def replica_pids(first_port: int, count: int) -> list[int]:
    """Pids of the `groundwork engine serve --port P` replicas `groundwork up --replicas` started."""
    wanted = {str(first_port + i) for i in range(count)}
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in argv]
        if "serve" in args and "--port" in args and args[args.index("--port") + 1] in wanted:
            pids.append(int(proc.name))
    return pids


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:  # a stage that did not run (rerank off): null in the JSON, "-" in the table
        return {"p50": None, "p99": None, "n": 0}
    return {
        "p50": float(np.percentile(values, 50)),
        "p99": float(np.percentile(values, 99)),
        "n": len(values),
    }


def shared_prefix_tokens(a: dict, b: dict, block: int = 16) -> int:
    """Tokens of `a`'s prompt that `b`'s could have left in a prefix cache, in whole KV blocks: the
    instructions, then the leading sources both list in the same order, then the question if all
    sources and the question are the same (from each answer's `context` report). The chat
    template's tokens all count as shared, so this errs high, as a bound should."""
    ca, cb = a["context"], b["context"]
    parts = ca["system_tokens"] + ca["sources_tokens"] + ca["question_tokens"] + ca["history_tokens"]
    shared = ca["system_tokens"] + a["usage"]["prompt_tokens"] - parts
    same = 0
    for sa, sb in zip(ca["sources"], cb["sources"], strict=False):
        if sa["chunk_id"] != sb["chunk_id"]:
            break
        shared += sa["tokens"]
        same += 1
    if same == len(ca["sources"]) == len(cb["sources"]) and a["query"] == b["query"]:
        shared += ca["question_tokens"]
    return shared // block * block


def cache_bound(answers: list[dict]) -> float:
    """The hit rate if every prompt found, in one cache, everything an earlier one could leave (in
    arrival order; no eviction, no concurrency): no routing over several caches can beat it."""
    prompt = sum(a["usage"]["prompt_tokens"] for a in answers)
    cached = sum(
        max((shared_prefix_tokens(a, b) for b in answers[:i]), default=0) for i, a in enumerate(answers)
    )
    return cached / prompt if prompt else float("nan")


def metric(base_url: str, prefix: str) -> float:
    """The first sample of /metrics whose line starts with `prefix` (name and labels)."""
    for line in httpx.get(f"{base_url}/metrics").text.splitlines():
        if line.startswith(prefix):
            return float(line.split()[-1])
    return float("nan")


HIT_RATE = "groundwork_ask_prefix_cache_hit_rate "
ASK_ROUND_TRIPS = 'groundwork:sql_round_trips_total{route="/v1/ask"}'


def run_once(args, questions: list[str], routing: str | None) -> dict:
    """One fresh platform, the warm-up question, then the measured concurrent run."""
    data_dir = Path(tempfile.mkdtemp(prefix="groundwork-bench-qa-"))
    data_dir.chmod(0o755)
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}"
    env = dict(item.split("=", 1) for item in args.env)
    if args.backend == "vllm":
        env["GROUNDWORK_ENGINE__BACKEND"] = "vllm"
    if routing:
        env["GROUNDWORK_ENGINE__ROUTER__POLICY"] = routing
    if args.replicas > 1 and args.backend == "ours":
        # NOTE: N engines share the machine's cores: one thread each, not N x all cores.
        env["GROUNDWORK_ENGINE__CPU_THREADS"] = str(max(1, (os.cpu_count() or 1) // args.replicas))
        env["GROUNDWORK_ENGINE__KV_CACHE_MEMORY_GB"] = str(args.replica_kv_gb)
    up_args = ["--replicas", str(args.replicas)] if args.replicas > 1 else []
    proc = start_platform(data_dir, port, env, up_args)
    killed = None
    try:
        warm, _ = asyncio.run(ask_all(base_url, questions[:1], args.max_tokens))  # warm-up: loads the engine
        if args.kill_replica_after is not None:
            from cli.llm_servers import REPLICA_BASE_PORT

            victim = replica_pids(REPLICA_BASE_PORT, args.replicas)[0]
            timer = threading.Timer(args.kill_replica_after, os.kill, (victim, signal.SIGKILL))
            timer.start()
            killed = {"pid": victim, "after_s": args.kill_replica_after}
        round_trips = metric(base_url, ASK_ROUND_TRIPS)
        answers, wall = asyncio.run(
            ask_all(base_url, questions, args.max_tokens, strict=args.kill_replica_after is None)
        )
        rate = metric(base_url, HIT_RATE)
        round_trips = metric(base_url, ASK_ROUND_TRIPS) - round_trips
    except Exception:
        print((data_dir / "up.log").read_text()[-5000:], file=sys.stderr)
        raise
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        log = (data_dir / "up.log").read_text(errors="replace")
        shutil.rmtree(data_dir, ignore_errors=True)

    failed = [a["error"] for a in answers if "error" in a]
    answers = [a for a in answers if "error" not in a]
    stages = {
        stage: _percentiles([a["timings"][f"{stage}_ms"] for a in answers if f"{stage}_ms" in a["timings"]])
        for stage in ("retrieval", "rerank", "ttft", "total")
    }
    # What the client waited, refusals and their Retry-After included.
    stages["client"] = _percentiles([a["client_ms"] for a in answers])
    completion = sum(a["usage"]["completion_tokens"] for a in answers)
    report = {
        "backend": args.backend,
        "replicas": args.replicas,
        "routing": routing,
        "concurrency": args.concurrency,
        "max_tokens": args.max_tokens,
        "wall_s": wall,
        "answers_per_s": len(answers) / wall,
        "completion_tokens_per_s": completion / wall,
        "latency_ms": stages,
        "prefix_cache_hit_rate": rate,
        # The metric counts the warm-up answer too, so the bound does.
        "prefix_cache_hit_rate_bound": cache_bound(warm + answers),
        "refused_then_retried": sum(a["refused"] for a in answers),
        # Database round trips (statements, commits, rollbacks) of the measured /v1/ask requests, over
        # the requests: refused ones included, since the rate limiter's storage is the database too.
        "sql_round_trips_per_request": round_trips / (len(answers) + sum(a["refused"] for a in answers))
        if answers
        else float("nan"),
        "grounded": sum(a["grounded"] for a in answers),
        "with_citations": sum(bool(a["citations"]) for a in answers),
    }
    if killed is not None:
        # The router logs each request it moved off a failed replica before any token had arrived.
        report["killed_replica"] = killed | {
            "answers_lost": len(failed),
            "errors": failed,
            "moved_before_streaming": log.count("failed before streaming"),
        }
    return report


def print_report(report: dict) -> None:
    title = (
        f"/v1/ask, {report['concurrency']} concurrent requests on the demo corpus, {report['backend']} engine"
    )
    if report["replicas"] > 1:
        title += f", {report['replicas']} replicas, {report['routing']} routing"
    table = Table(title=title)
    table.add_column("stage")
    table.add_column("p50 ms", justify="right")
    table.add_column("p99 ms", justify="right")
    table.add_column("n", justify="right")
    for stage, p in report["latency_ms"].items():
        cells = [f"{p[q]:.1f}" if p["n"] else "-" for q in ("p50", "p99")]
        table.add_row(stage, *cells, str(p["n"]))
    console = Console()
    console.print(table)
    console.print(
        f"wall {report['wall_s']:.1f} s · {report['answers_per_s']:.2f} answers/s · "
        f"{report['completion_tokens_per_s']:.1f} tokens/s · prefix-cache hit rate "
        f"{report['prefix_cache_hit_rate']:.1%} "
        f"(one cache at best: {report['prefix_cache_hit_rate_bound']:.1%}) · "
        f"{report['with_citations']}/{report['concurrency']} with citations · "
        f"{report['refused_then_retried']} refusals (503 + Retry-After) retried · "
        f"{report['sql_round_trips_per_request']:.1f} SQL round trips per /v1/ask request"
    )
    if "killed_replica" in report:
        k = report["killed_replica"]
        console.print(
            f"replica killed after {k['after_s']} s: {k['answers_lost']} answers lost, "
            f"{k['moved_before_streaming']} requests moved to another replica before streaming"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--backend", choices=["ours", "vllm"], default="ours")
    parser.add_argument("--replicas", type=int, default=1, help="`groundwork up --replicas N`")
    parser.add_argument(
        "--routing", default="prefix", help="Router policies to compare, comma-separated (with --replicas)."
    )
    parser.add_argument("--replica-kv-gb", type=float, default=0.5, help="KV budget of each local replica.")
    parser.add_argument("--kill-replica-after", type=float, default=None, help="Seconds into the run.")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument(
        "--env", action="append", default=[], help="A GROUNDWORK_* setting for the platform, NAME=VALUE."
    )
    args = parser.parse_args()
    questions = (QUESTIONS * (args.concurrency // len(QUESTIONS) + 1))[: args.concurrency]
    policies = args.routing.split(",") if args.replicas > 1 else [None]
    reports = [run_once(args, questions, policy) for policy in policies]
    for report in reports:
        print_report(report)
    result: dict = reports[0] if len(reports) == 1 else {"runs": reports}
    by_policy = {r["routing"]: r for r in reports}
    if {"prefix", "round_robin"} <= set(by_policy):
        prefix, rr = by_policy["prefix"], by_policy["round_robin"]
        result["prefix_vs_round_robin"] = {
            "hit_rate_ratio": prefix["prefix_cache_hit_rate"] / max(rr["prefix_cache_hit_rate"], 1e-9),
            "ttft_p50_ms": [prefix["latency_ms"]["ttft"]["p50"], rr["latency_ms"]["ttft"]["p50"]],
            # What no router could exceed on this workload: one cache holding everything, over round-robin.
            "hit_rate_ratio_bound": prefix["prefix_cache_hit_rate_bound"]
            / max(rr["prefix_cache_hit_rate"], 1e-9),
        }
        Console().print(f"prefix vs round-robin: {result['prefix_vs_round_robin']}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2))
    Console().print(f"results: {args.output}")


if __name__ == "__main__":
    main()
