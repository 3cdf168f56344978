"""Fair shares between tenants: `python -m benchmarks.fairness [--asks 8] [--rounds 3]
[--flood-clients 8] [--flood-agents 10] [--label NAME] [--env GROUNDWORK_X=V ...]`.

Starts the platform as a user would (`groundwork up` on a fresh data dir), makes two tenants with
their own collection (the same generated documents), then measures tenant B's asks, one at a time,
first with nothing else running, then while tenant D floods: `--flood-clients` closed-loop clients
asking without pause (refusals retried after 0.2 s) and `--flood-agents` background agent runs
started again as each one ends. Target (issue 28): B's ask p95 under the flood within 1.5x of
unloaded, and none of B's asks refused.

NOTE: B asks from its own process. Sharing the flooder's event loop, B's latency also held the
client's own work on D's 60 requests a second (its refusals and run polls), which a tenant on
another machine does not wait for.

Writes benchmarks/results/fairness.json and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
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
from benchmarks.qa import QUESTIONS, _free_port, start_platform
from benchmarks.serving import job, p95

RESULTS = Path(__file__).parent / "results" / "fairness.json"
COLLECTION = "fair-docs"


def tenant(client: httpx.Client, name: str, docs: list[tuple[str, bytes]]) -> dict[str, str]:
    """A tenant with its collection ingested; returns its auth header."""
    key = client.post("/v1/admin/tenants", json={"name": name}).json()["key"]
    headers = {"authorization": f"Bearer {key}"}
    client.post("/v1/collections", json={"name": COLLECTION}, headers=headers).raise_for_status()
    files = [("files", (n, d, "text/markdown")) for n, d in docs]
    resp = client.post(f"/v1/collections/{COLLECTION}/documents", files=files, headers=headers)
    resp.raise_for_status()
    while job(client, resp.json()["job_id"], headers)["status"] in ("queued", "running"):
        time.sleep(0.5)
    return headers


def _ask_body(i: int) -> dict:
    return {
        "collection": COLLECTION,
        "question": QUESTIONS[i % len(QUESTIONS)],
        "generation": {"max_tokens": 32},
    }


async def victim(
    client: httpx.AsyncClient, headers: dict, asks: int, rounds: int = 1
) -> tuple[list[float], list[int], list[dict]]:
    """B's `asks` questions one after another, `rounds` times: latencies of the answered ones, every
    status, and each answer's stage timings with `outside_ms`, the time spent outside the answer
    pipeline (middlewares, authentication, the rate limiter, the turn's record, HTTP)."""
    latencies, statuses, stages = [], [], []
    for i in range(asks * rounds):
        start = time.perf_counter()
        resp = await client.post("/v1/ask", json=_ask_body(i % asks), headers=headers)
        statuses.append(resp.status_code)
        if resp.status_code == 200:
            latencies.append((time.perf_counter() - start) * 1000)
            timings = resp.json()["timings"]
            stages.append({**timings, "outside_ms": latencies[-1] - timings.get("total_ms", 0.0)})
    return latencies, statuses, stages


async def metric_samples(client: httpx.AsyncClient, family: str) -> list:
    """The API's samples of one metric family, from /metrics."""
    text = (await client.get("/metrics")).text
    return [s for f in text_string_to_metric_families(text) if f.name == family for s in f.samples]


async def gc_pauses(client: httpx.AsyncClient) -> dict[str, float]:
    """The API process's full (generation 2) collections so far: count and seconds."""
    out = {"count": 0.0, "seconds": 0.0}
    for sample in await metric_samples(client, "groundwork_gc_pause_seconds"):
        if sample.labels.get("generation") == "2" and sample.name.endswith(("_count", "_sum")):
            out["count" if sample.name.endswith("_count") else "seconds"] += sample.value
    return out


async def ask_round_trips(client: httpx.AsyncClient) -> float:
    """SQL statements and commits the API has sent for /v1/ask so far (every storage's)."""
    samples = await metric_samples(client, "groundwork:sql_round_trips")
    return sum(s.value for s in samples if s.labels.get("route") == "/v1/ask" and s.name.endswith("_total"))


def median_stages(stages: list[dict]) -> dict[str, float]:
    names = sorted({name for s in stages for name in s})
    return {name: round(float(np.median([s.get(name, 0.0) for s in stages])), 1) for name in names}


async def flood(
    client: httpx.AsyncClient, headers: dict, clients: int, agents: int, stop: asyncio.Event
) -> dict:
    counts = {"asks_ok": 0, "asks_refused": 0, "agent_runs": 0, "agent_refused": 0}

    async def asker(n: int) -> None:
        while not stop.is_set():
            resp = await client.post("/v1/ask", json=_ask_body(n), headers=headers)
            counts["asks_ok" if resp.status_code == 200 else "asks_refused"] += 1
            if resp.status_code != 200:
                await asyncio.sleep(0.2)

    async def agent() -> None:
        body = {"input": "What does the scheduler do?", "background": True, "tools": ["search"]}
        while not stop.is_set():
            resp = await client.post("/v1/agents/runs", json=body, headers=headers)
            if resp.status_code != 202:
                counts["agent_refused"] += 1
                await asyncio.sleep(1)
                continue
            counts["agent_runs"] += 1
            run_id = resp.json()["id"]
            while not stop.is_set():
                run = (await client.get(f"/v1/agents/runs/{run_id}", headers=headers)).json()
                if run["finished_at"]:
                    break
                await asyncio.sleep(0.5)

    tasks = [asyncio.create_task(asker(i)) for i in range(clients)] + [
        asyncio.create_task(agent()) for _ in range(agents)
    ]
    await stop.wait()
    await asyncio.gather(*tasks, return_exceptions=True)
    return counts


def victim_process(base_url: str, headers: dict, asks: int, rounds: int) -> tuple[list, list, list]:
    """`victim` in a process of its own (a `multiprocessing` target: module level)."""

    async def run() -> tuple[list, list, list]:
        async with httpx.AsyncClient(base_url=base_url, timeout=600) as client:
            return await victim(client, headers, asks, rounds)

    return asyncio.run(run())


async def measure(base_url: str, b: dict, d: dict, args) -> dict:
    with multiprocessing.get_context("spawn").Pool(1) as pool:

        async def as_b(asks: int, rounds: int = 1) -> tuple[list, list, list]:
            return await asyncio.to_thread(pool.apply, victim_process, (base_url, b, asks, rounds))

        await as_b(2)  # warm-up: models loaded
        async with httpx.AsyncClient(base_url=base_url, timeout=600) as client:
            trips_before = await ask_round_trips(client)
            unloaded, unloaded_status, unloaded_stages = await as_b(args.asks, args.rounds)
            trips = (await ask_round_trips(client) - trips_before) / len(unloaded_status)
            stop = asyncio.Event()
            flooding = asyncio.create_task(flood(client, d, args.flood_clients, args.flood_agents, stop))
            gc_before = await gc_pauses(client)
            await asyncio.sleep(args.ramp_s)  # the flood is running before B asks
            loaded, loaded_status, loaded_stages = await as_b(args.asks, args.rounds)
            gc_after = await gc_pauses(client)
            stop.set()
            counts = await flooding
    return {
        "unloaded_p50_ms": float(np.percentile(unloaded, 50)),
        "unloaded_p95_ms": p95(unloaded),
        "flooded_p50_ms": float(np.percentile(loaded, 50)) if loaded else None,
        "flooded_p95_ms": p95(loaded) if loaded else None,
        "p95_ratio": p95(loaded) / p95(unloaded) if loaded else None,
        "b_refused": sum(s != 200 for s in unloaded_status + loaded_status),
        "b_statuses": loaded_status,
        # Unloaded, where B's are the only asks: what one ask costs the database.
        "b_sql_round_trips_per_ask": round(trips, 1),
        "b_stage_medians_ms": {
            "unloaded": median_stages(unloaded_stages),
            "flooded": median_stages(loaded_stages),
        },
        "flooder": counts,
        # The API's full garbage collections during the flood (each holds every request meanwhile).
        "flood_gc2": {k: round(gc_after[k] - gc_before[k], 3) for k in gc_after},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--asks", type=int, default=8, help="B's questions per phase.")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="Times B asks its questions per phase: a p95 over 8 samples is their maximum, one outlier.",
    )
    parser.add_argument("--flood-clients", type=int, default=8, help="D's closed-loop ask clients.")
    parser.add_argument("--flood-agents", type=int, default=10, help="D's background agent runs at once.")
    parser.add_argument("--ramp-s", type=float, default=10, help="Seconds of flood before B asks.")
    parser.add_argument("--docs", type=int, default=20, help="Generated documents per tenant.")
    parser.add_argument("--label", default="default", help="The run's name in the results file.")
    parser.add_argument(
        "--env", action="append", default=[], help="A GROUNDWORK_* setting for the platform, NAME=VALUE."
    )
    args = parser.parse_args()

    from benchmarks.ingest import make_documents

    docs = [(u.filename, u.data) for u in make_documents(args.docs, 6, 0, "fair")]
    data_dir = Path(tempfile.mkdtemp(prefix="gw-bench-fairness-"))
    port = _free_port()
    proc = start_platform(data_dir, port, dict(item.split("=", 1) for item in args.env))
    try:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=600) as client:
            b, d = tenant(client, "victim-b", docs), tenant(client, "flooder-d", docs)
        report = asyncio.run(measure(base, b, d, args))
        report["platform_alive"] = proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        shutil.rmtree(data_dir, ignore_errors=True)

    runs = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    runs[args.label] = {"args": vars(args), "machine": cpu_info(), **report}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(runs, indent=2))
    table = Table(title="Tenant B's asks while tenant D floods asks and agent runs")
    for column in ("unloaded p50 / p95 ms", "flooded p50 / p95 ms", "p95 ratio (target <= 1.5)", "B refused"):
        table.add_column(column)
    flooded = f"{report['flooded_p50_ms'] or 0:.0f} / {report['flooded_p95_ms'] or 0:.0f}"
    table.add_row(
        f"{report['unloaded_p50_ms']:.0f} / {report['unloaded_p95_ms']:.0f}",
        flooded,
        f"{report['p95_ratio'] or float('nan'):.2f}",
        str(report["b_refused"]),
    )
    Console().print(table)
    Console().print("flooder:", report["flooder"])
    Console().print("B's stage medians (ms):", report["b_stage_medians_ms"])
    Console().print("SQL round trips per ask of B (unloaded):", report["b_sql_round_trips_per_ask"])
    Console().print("API's full garbage collections during the flood:", report["flood_gc2"])


if __name__ == "__main__":
    main()
