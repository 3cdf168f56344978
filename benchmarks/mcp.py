"""MCP `search` against the same REST search: `python -m benchmarks.mcp [--requests 40]`.

Starts the platform as a user would (`groundwork up` on a fresh data dir, demo corpus), warms both
paths, then alternates one REST `POST /v1/collections/{id}/search`, one MCP `tools/call search`
(the SDK's own client over Streamable HTTP, one connection) and the same JSON-RPC request posted by
a plain HTTP client (`mcp_plain`: the server's share of the overhead, without the SDK client's),
with the same query and result count, so that all see the same load. Sequential requests, wall time
at the client. Target (issue 29): MCP overhead within 10 ms p50. Writes benchmarks/results/mcp.json,
prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
from mcp import Client
from mcp_types import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY
from mcp_types.version import LATEST_PROTOCOL_VERSION
from rich.console import Console
from rich.table import Table

from benchmarks.agents import cpu_info
from benchmarks.qa import QUESTIONS, _free_port, start_platform
from cli.demo import DEMO_COLLECTION

RESULTS = Path(__file__).parent / "results" / "mcp.json"
K = 10


def plain_call(i: int, arguments: dict) -> tuple[dict, dict]:
    """The body and headers of a `tools/call search` as the SDK's client sends it (this protocol
    version carries its envelope in `_meta`)."""
    meta = {PROTOCOL_VERSION_META_KEY: LATEST_PROTOCOL_VERSION, CLIENT_CAPABILITIES_META_KEY: {}}
    body = {
        "jsonrpc": "2.0",
        "id": i,
        "method": "tools/call",
        "params": {"name": "search", "arguments": arguments, "_meta": meta},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": LATEST_PROTOCOL_VERSION,
        "mcp-method": "tools/call",
        "mcp-name": "search",
    }
    return body, headers


async def measure(base: str, requests: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"rest": [], "mcp": [], "mcp_plain": []}
    async with httpx.AsyncClient(base_url=base, timeout=600) as http, Client(f"{base}/mcp") as mcp:
        demo = next(
            c["id"] for c in (await http.get("/v1/collections")).json() if c["name"] == DEMO_COLLECTION
        )
        for i in range(requests + 5):  # the first 5 warm both paths up
            query = QUESTIONS[i % len(QUESTIONS)]
            start = time.perf_counter()
            # NOTE: MCP asks for one result more than its page (is there a next page?): so does REST here.
            rest = await http.post(f"/v1/collections/{demo}/search", json={"query": query, "top_k": K + 1})
            rest_ms = (time.perf_counter() - start) * 1000
            rest.raise_for_status()
            start = time.perf_counter()
            arguments = {"collections": [demo], "query": query, "k": K}
            result = await mcp.call_tool("search", arguments)
            mcp_ms = (time.perf_counter() - start) * 1000
            body, headers = plain_call(i, arguments)
            start = time.perf_counter()
            plain = await http.post("/mcp", json=body, headers=headers)
            plain_ms = (time.perf_counter() - start) * 1000
            assert not result.is_error, result.content
            expected = [r["chunk_id"] for r in rest.json()["results"][:K]]
            assert [r["chunk_id"] for r in result.structured_content["results"]] == expected
            plain_hits = plain.json()["result"]["structuredContent"]["results"]
            assert [r["chunk_id"] for r in plain_hits] == expected, plain.text[:300]
            if i >= 5:
                out["rest"].append(rest_ms)
                out["mcp"].append(mcp_ms)
                out["mcp_plain"].append(plain_ms)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=40, help="Timed requests per path.")
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="gw-bench-mcp-"))
    port = _free_port()
    proc = start_platform(data_dir, port)
    try:
        times = asyncio.run(measure(f"http://127.0.0.1:{port}", args.requests))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        shutil.rmtree(data_dir, ignore_errors=True)
    rows = {
        path: {"p50_ms": float(np.percentile(v, 50)), "p95_ms": float(np.percentile(v, 95))}
        for path, v in times.items()
    }
    rest = np.array(times["rest"])
    overhead = float(np.percentile(np.array(times["mcp"]) - rest, 50))
    server_share = float(np.percentile(np.array(times["mcp_plain"]) - rest, 50))
    report = {
        "requests": args.requests,
        "k": K,
        "paths": rows,
        "overhead_p50_ms": overhead,
        "server_overhead_p50_ms": server_share,
        "load_average": list(os.getloadavg()),
        "target_ms": 10,
        "met": overhead <= 10,
        "cpu": cpu_info(),
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    table = Table("path", "p50 ms", "p95 ms", title=f"search, k={K}, {args.requests} requests each")
    for path, row in rows.items():
        table.add_row(path, f"{row['p50_ms']:.1f}", f"{row['p95_ms']:.1f}")
    Console().print(table)
    Console().print(f"MCP overhead, p50 of paired differences: {overhead:.1f} ms (target <= 10 ms)")
    Console().print(f"of which the server's (plain HTTP client, same JSON-RPC): {server_share:.1f} ms")


if __name__ == "__main__":
    main()
