"""Serving while ingesting, and overload: `python -m benchmarks.serving [--docs 300] [--rounds 2]
[--worker-nice N] [--overload-s 60] [--answer-latency-target null] [--label NAME]`.

Starts the platform as a user would (`groundwork up` on a fresh data dir, demo corpus), then
alternates rounds: search and ask latency with nothing else running, then the same requests while a
bulk upload of `--docs` generated documents is being ingested (a new batch each round, so the
worker is busy throughout; the round checks that it still was when the requests ended). Requests
are sequential, one user's view; asks are short (32 tokens) so retrieval and prefill dominate.
Target (issue 12): search and ask p95 with a bulk ingest running within 1.5x of unloaded.

Overload: capacity = asks per second completed by 8 closed-loop clients (refused ones retried after a
pause); then asks arrive at twice that rate for `--overload-s` seconds. Target: the excess refused
with 429/503 + Retry-After, nothing else failing, the platform alive, admitted asks' p99 within 2x
of unloaded. Beside the admitted throughput, goodput: asks/s that met every SLO of the ask route
(`slo.routes.ask`), read from the platform's own `groundwork:slo_*` counters over the phase.
Writes benchmarks/results/serving.json and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from rich.table import Table

from benchmarks.agents import cpu_info
from benchmarks.ingest import make_documents
from benchmarks.qa import QUESTIONS, _free_port, start_platform
from cli.demo import DEMO_COLLECTION

RESULTS = Path(__file__).parent / "results" / "serving.json"
BULK = "bulk-ingest"


def timed_requests(client: httpx.Client, searches: int, asks: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"search": [], "ask": []}
    demo = next(c["id"] for c in client.get("/v1/collections").json() if c["name"] == DEMO_COLLECTION)
    for i in range(max(searches, asks)):
        question = QUESTIONS[i % len(QUESTIONS)]
        if i < searches:
            start = time.perf_counter()
            client.post(
                f"/v1/collections/{demo}/search", json={"query": question, "top_k": 10}
            ).raise_for_status()
            out["search"].append((time.perf_counter() - start) * 1000)
        if i < asks:
            body = {"collection": DEMO_COLLECTION, "question": question, "generation": {"max_tokens": 32}}
            start = time.perf_counter()
            client.post("/v1/ask", json=body).raise_for_status()
            out["ask"].append((time.perf_counter() - start) * 1000)
    return out


def upload_bulk(client: httpx.Client, docs: int, round_no: int) -> str:
    uploads = make_documents(docs, 6, round_no, f"r{round_no}")
    files = [("files", (u.filename, u.data, "text/markdown")) for u in uploads]
    resp = client.post(f"/v1/collections/{BULK}/documents", files=files)
    resp.raise_for_status()
    return resp.json()["job_id"]


def job(client: httpx.Client, job_id: str, headers: dict | None = None) -> dict:
    """The job as its tenant (`headers`: its key, where auth is on) sees it."""
    resp = client.get(f"/v1/jobs/{job_id}", headers=headers)
    resp.raise_for_status()
    return resp.json()


async def _ask(client: httpx.AsyncClient, question: str) -> tuple[int, float, str | None]:
    body = {"collection": DEMO_COLLECTION, "question": question, "generation": {"max_tokens": 32}}
    start = time.perf_counter()
    resp = await client.post("/v1/ask", json=body)
    return resp.status_code, (time.perf_counter() - start) * 1000, resp.headers.get("retry-after")


async def slo_counts(client: httpx.AsyncClient, route: str = "ask") -> tuple[float, float]:
    """(good, all) requests of `route` so far, from the platform's /metrics."""
    text = (await client.get("/metrics")).text
    values = {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.labels.get("route") == route
    }
    return values.get("groundwork:slo_good_requests_total", 0.0), values.get(
        "groundwork:slo_requests_total", 0.0
    )


async def overload(base_url: str, seconds: float, clients: int = 8) -> dict:
    async with httpx.AsyncClient(base_url=base_url, timeout=600) as client:
        done = 0
        stop_at = time.perf_counter() + 30

        async def closed_loop(i: int) -> None:
            nonlocal done
            while time.perf_counter() < stop_at:
                status, _, retry = await _ask(client, QUESTIONS[(i + done) % len(QUESTIONS)])
                done += status == 200
                if status != 200:
                    await asyncio.sleep(float(retry or 1))

        start = time.perf_counter()
        await asyncio.gather(*(closed_loop(i) for i in range(clients)))
        capacity = done / (time.perf_counter() - start)
        rate = 2 * capacity
        tasks = []
        good_before, all_before = await slo_counts(client)
        start = time.perf_counter()
        for i in range(int(seconds * rate)):
            await asyncio.sleep(max(0.0, start + i / rate - time.perf_counter()))
            tasks.append(asyncio.create_task(_ask(client, QUESTIONS[i % len(QUESTIONS)])))
        results = await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - start
        good_after, all_after = await slo_counts(client)
    good = good_after - good_before
    admitted = [ms for status, ms, _ in results if status == 200]
    refused = [(status, retry) for status, _, retry in results if status in (429, 503)]
    return {
        "capacity_asks_per_s": capacity,
        "offered_asks_per_s": rate,
        "sent": len(results),
        "admitted": len(admitted),
        "refused_429": sum(s == 429 for s, _ in refused),
        "refused_503": sum(s == 503 for s, _ in refused),
        "refused_without_retry_after": sum(not retry for _, retry in refused),
        "other_statuses": sorted({s for s, _, _ in results} - {200, 429, 503}),
        "admitted_p99_ms": float(np.percentile(admitted, 99)) if admitted else None,
        "throughput_asks_per_s": len(admitted) / elapsed,
        "goodput_asks_per_s": good / elapsed,
        "goodput_share": good / (all_after - all_before) if all_after > all_before else None,
    }


def p95(values: list[float]) -> float:
    return float(np.percentile(values, 95))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=300, help="Documents per bulk upload (6 paragraphs).")
    parser.add_argument("--rounds", type=int, default=2, help="Unloaded + loaded pairs.")
    parser.add_argument("--searches", type=int, default=30, help="Searches per phase.")
    parser.add_argument("--asks", type=int, default=6, help="Asks per phase.")
    parser.add_argument("--worker-nice", type=int, default=None, help="Override ingestion.worker_nice.")
    parser.add_argument("--overload-s", type=float, default=60, help="Seconds at 2x capacity (0: skip).")
    parser.add_argument(
        "--max-concurrent-answers", type=int, default=None, help="Set qa.max_concurrent_answers (admission)."
    )
    parser.add_argument(
        "--answer-latency-target", default=None, help="Set qa.answer_latency_target ('null': no admission)."
    )
    parser.add_argument("--label", default="default", help="The run's name in the results file.")
    args = parser.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="gw-bench-serving-"))
    env = {}
    if args.worker_nice is not None:
        env["GROUNDWORK_INGESTION__WORKER_NICE"] = str(args.worker_nice)
    if args.max_concurrent_answers is not None:
        env["GROUNDWORK_QA__MAX_CONCURRENT_ANSWERS"] = str(args.max_concurrent_answers)
    if args.answer_latency_target is not None:
        env["GROUNDWORK_QA__ANSWER_LATENCY_TARGET"] = args.answer_latency_target
    port = _free_port()
    proc = start_platform(data_dir, port, env)
    phases = {p: {"search": [], "ask": []} for p in ("unloaded", "ingesting")}
    jobs = []
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:
            client.post("/v1/collections", json={"name": BULK}).raise_for_status()
            timed_requests(client, 5, 2)  # warm-up: models loaded, caches filled
            for round_no in range(args.rounds):
                for name, values in timed_requests(client, args.searches, args.asks).items():
                    phases["unloaded"][name] += values
                job_id = upload_bulk(client, args.docs, round_no)
                while job(client, job_id)["status"] == "queued":
                    time.sleep(0.2)
                for name, values in timed_requests(client, args.searches, args.asks).items():
                    phases["ingesting"][name] += values
                state = job(client, job_id)  # still running, or the round measured an idle worker
                jobs.append({k: state[k] for k in ("status", "documents_total", "documents_done")})
                while job(client, job_id)["status"] in ("queued", "running"):  # the next round starts idle
                    time.sleep(1)
        over = asyncio.run(overload(f"http://127.0.0.1:{port}", args.overload_s)) if args.overload_s else None
        alive = proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        shutil.rmtree(data_dir, ignore_errors=True)

    rows = {}
    for name in ("search", "ask"):
        unloaded, loaded = phases["unloaded"][name], phases["ingesting"][name]
        rows[name] = {
            "unloaded_p50_ms": float(np.percentile(unloaded, 50)),
            "unloaded_p95_ms": p95(unloaded),
            "ingesting_p50_ms": float(np.percentile(loaded, 50)),
            "ingesting_p95_ms": p95(loaded),
            "p95_ratio": p95(loaded) / p95(unloaded),
            "n": len(loaded),
        }
    if over is not None:
        over["unloaded_ask_p99_ms"] = float(np.percentile(phases["unloaded"]["ask"], 99))
        admitted = over["admitted_p99_ms"]
        over["p99_ratio"] = admitted / over["unloaded_ask_p99_ms"] if admitted else None
        over["platform_alive"] = alive
    report = {"args": vars(args), "machine": cpu_info(), "requests": rows, "jobs": jobs, "overload": over}
    # One entry a label: runs of other settings (e.g. no admission) stay beside the default's.
    runs = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    runs[args.label] = report
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(runs, indent=1))
    nice = "default" if args.worker_nice is None else args.worker_nice
    table = Table(title=f"Serving while ingesting ({args.docs} docs a round, worker_nice {nice})")
    for column in ("request", "unloaded p50 / p95 ms", "ingesting p50 / p95 ms", "p95 ratio (target <= 1.5)"):
        table.add_column(column)
    for name, r in rows.items():
        table.add_row(
            name,
            f"{r['unloaded_p50_ms']:.0f} / {r['unloaded_p95_ms']:.0f}",
            f"{r['ingesting_p50_ms']:.0f} / {r['ingesting_p95_ms']:.0f}",
            f"{r['p95_ratio']:.2f}",
        )
    Console().print(table)
    Console().print("jobs when the loaded requests ended:", jobs)
    Console().print("overload (2x capacity):", over)


if __name__ == "__main__":
    main()
