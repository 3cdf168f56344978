"""`groundwork eval run | show | compare | sweep | apply | retrieval`: evaluation runs as API jobs.

Like `groundwork ingest`, these talk to the running API over HTTP (`--api-url`); a local dataset
folder or file is uploaded first, and progress is followed until the run ends.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from cli.http import ApiKey, ApiUrl, check_response, make_client

app = typer.Typer(
    help="Evaluation runs: retrieval, answer and agent quality, sweeps, comparisons.", no_args_is_help=True
)
console = Console()
DEFAULT_FORMAT = {"retrieval": "beir", "answer": "jsonl", "agent": "bfcl"}
MAIN_COLUMNS = {
    "retrieval": ["ndcg@10", "recall@10", "recall@100", "mrr@10", "map", "latency_ms_p50", "latency_ms_p99"],
    "answer": [
        "exact_match",
        "token_f1",
        "contains_gold",
        "citation_precision",
        "citation_recall",
        "no_answer_accuracy",
        "faithfulness_model_judged",
        "latency_ms_p50",
        "latency_ms_p99",
        "tokens_total",
    ],
    "agent": [
        "success",
        "called",
        "schema_valid",
        "ast_accuracy",
        "irrelevance_accuracy",
        "latency_ms_p50",
        "tokens_total",
    ],
}


def upload(client: httpx.Client, local: Path) -> str:
    """Upload a dataset folder (or one file) and return its server-side path."""
    files = [p for p in sorted(local.rglob("*")) if p.is_file()] if local.is_dir() else [local]
    root = local if local.is_dir() else local.parent
    parts = [("files", (p.relative_to(root).as_posix(), p.read_bytes())) for p in files]
    return check_response(client.post("/v1/evals/datasets", files=parts))["path"]


def parse_sweep(items: list[str]) -> dict[str, list]:
    """['fusion.alpha=0.3,0.5', 'fusion.method=rrf,convex'] -> {'fusion.alpha': [0.3, 0.5], ...}."""
    out = {}
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not values:
            raise typer.BadParameter(f"{item!r}: expected key=value1,value2", param_hint="--set")
        out[key.strip()] = [_value(v) for v in values.split(",")]
    return out


def _value(raw: str):
    try:
        return json.loads(raw)
    except ValueError:
        return raw.strip()


def follow(client: httpx.Client, run_id: str, interval: float = 0.5) -> dict:
    """A progress bar over the run's items until it ends; returns the final run."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task("queued", total=None)
        while True:
            run = check_response(client.get(f"/v1/evals/{run_id}"))
            stage = run["progress"].get("stage", run["status"])
            if stage == "ingesting":
                total, done = run["progress"].get("total"), run["progress"].get("done", 0)
                progress.update(bar, total=total, completed=done, description="ingesting corpus")
            else:
                progress.update(
                    bar,
                    total=run["items_total"] or None,
                    completed=run["items_done"],
                    description=run["status"],
                )
            if run["status"] not in ("queued", "running"):
                return run
            time.sleep(interval)


def print_run(run: dict) -> None:
    console.print(
        f"run {run['id']} ({run['kind']}, {run['name'] or 'unnamed'}): [bold]{run['status']}[/bold]"
    )
    if run["error"]:
        console.print(f"[red]{run['error']}[/red]")
    variants = run["metrics"].get("variants", {})
    if not variants:
        return
    columns = MAIN_COLUMNS[run["kind"]]
    table = Table()
    table.add_column("variant")
    for col in columns:
        table.add_column(col, justify="right")
    for label, row in variants.items():
        table.add_row(label, *(str(row.get(c, "-")) for c in columns))
    console.print(table)


def start(
    client: httpx.Client, body: dict, dataset: Path | None, server_path: str | None, wait: bool
) -> dict:
    if (dataset is None) == (server_path is None):
        raise typer.BadParameter("give a local DATASET or --server-path (under <data_dir>/evals)")
    path = upload(client, dataset) if dataset is not None else server_path
    body = {**body, "dataset": {**body.get("dataset", {}), "path": path}}
    if body.get("judge"):
        cost = check_response(client.post("/v1/evals/estimate", json=body))
        console.print(
            f"model-judged faithfulness: ~{cost['judge_verdicts']} verdicts, ~{cost['judge_tokens']:,} tokens"
        )
    run = check_response(client.post("/v1/evals", json=body))
    console.print(f"eval run {run['id']} queued")
    return follow(client, run["id"]) if wait else run


def _finish(run: dict, output: Path | None) -> None:
    print_run(run)
    if output is not None:
        output.write_text(json.dumps(run, indent=2) + "\n")
        console.print(f"report written to {output}")
    if run["status"] not in ("succeeded", "queued", "running"):
        raise typer.Exit(1)


Dataset = typer.Argument(None, exists=True, help="Local dataset folder or file (uploaded).")
ServerPath = typer.Option(None, help="A dataset already under <data_dir>/evals on the server.")


@app.command()
def run(
    dataset: Path | None = Dataset,
    kind: str = typer.Option("retrieval", help="retrieval, answer or agent."),
    fmt: str = typer.Option(
        None, "--format", help="beir (retrieval), jsonl or pubmedqa (answer), bfcl (agent)."
    ),
    split: str = typer.Option("test", help="qrels split; pubmedqa: test, dev or all; bfcl: the category."),
    server_path: str | None = ServerPath,
    collection: str | None = typer.Option(None, help="Evaluate this existing collection."),
    collection_name: str | None = typer.Option(None, help="Ingest the corpus into a new, kept collection."),
    retrieval: str = typer.Option("{}", help='Retrieval overrides as JSON, e.g. \'{"mode": "bm25"}\'.'),
    max_items: int | None = typer.Option(None, help="Evaluate only the first N items."),
    judge: int = typer.Option(
        0, help="Answer runs: judge faithfulness with the generator this many times (model-judged; 0: off)."
    ),
    name: str = typer.Option("", help="A name for the run."),
    wait: bool = typer.Option(True, help="Follow progress until the run ends."),
    output: Path | None = typer.Option(None, help="Write the final run (JSON) here."),
    api_url: str | None = ApiUrl,
    api_key: str | None = ApiKey,
) -> None:
    """Start an evaluation run and follow it."""
    body = {
        "kind": kind,
        "name": name,
        "dataset": {"format": fmt or DEFAULT_FORMAT.get(kind, "jsonl"), "split": split},
        "collection": collection,
        "collection_name": collection_name,
        "retrieval": json.loads(retrieval),
        "max_items": max_items,
        "judge": {"repeats": judge} if judge else None,
    }
    with make_client(api_url, api_key) as client:
        _finish(start(client, body, dataset, server_path, wait), output)


@app.command()
def sweep(
    dataset: Path | None = Dataset,
    set_: list[str] = typer.Option(
        ..., "--set", help="key=v1,v2 (repeatable), e.g. fusion.alpha=0.3,0.5,0.7"
    ),
    server_path: str | None = ServerPath,
    collection: str | None = typer.Option(None, help="Evaluate this existing collection."),
    collection_name: str | None = typer.Option(
        None, help="Ingest into a new, kept collection (to apply to)."
    ),
    max_items: int | None = typer.Option(None, help="Evaluate only the first N items."),
    plot: Path | None = typer.Option(None, help="Save the Pareto plot here (.png or .svg)."),
    output: Path | None = typer.Option(None, help="Write the final run (JSON) here."),
    api_url: str | None = ApiUrl,
    api_key: str | None = ApiKey,
) -> None:
    """Sweep retrieval settings: one variant per combination; prints quality vs latency."""
    body = {
        "kind": "retrieval",
        "name": "sweep",
        "collection": collection,
        "collection_name": collection_name,
        "sweep": parse_sweep(set_),
        "max_items": max_items,
    }
    with make_client(api_url, api_key) as client:
        result = start(client, body, dataset, server_path, True)
        if result["status"] == "succeeded":
            table = check_response(client.get(f"/v1/evals/{result['id']}/sweep"))
            console.print(
                f"best {table['metric']}: {table['best']}; Pareto front: "
                + ", ".join(r["label"] for r in table["rows"] if r["pareto"])
            )
            if plot is not None:
                fmt = "svg" if plot.suffix == ".svg" else "png"
                response = client.get(f"/v1/evals/{result['id']}/sweep/plot", params={"format": fmt})
                plot.write_bytes(response.content)
                console.print(f"plot written to {plot}")
        _finish(result, output)


@app.command()
def show(
    run_id: str,
    items: int = typer.Option(0, help="Also list the first N items."),
    api_url: str | None = ApiUrl,
    api_key: str | None = ApiKey,
) -> None:
    """A run's status, progress and metrics per variant."""
    with make_client(api_url, api_key) as client:
        run = check_response(client.get(f"/v1/evals/{run_id}"))
        print_run(run)
        if items:
            for item in check_response(client.get(f"/v1/evals/{run_id}/items", params={"limit": items})):
                console.print(f"{item['variant']} {item['item_key']}: {item['metrics']}")


@app.command()
def compare(
    run_a: str,
    run_b: str,
    api_url: str | None = ApiUrl,
    api_key: str | None = ApiKey,
) -> None:
    """Metric deltas (B - A), per-item wins and losses, and paired tests on the main metric."""
    with make_client(api_url, api_key) as client:
        result = check_response(client.get(f"/v1/evals/{run_a}/compare/{run_b}"))
    table = Table(title=f"B - A ({result['b']['variant']} vs {result['a']['variant']})")
    table.add_column("metric")
    table.add_column("delta", justify="right")
    for name, delta in result["deltas"].items():
        table.add_row(name, f"{delta:+.4f}")
    console.print(table)
    test = result["test"]
    console.print(
        f"{result['metric']}: {result['wins']} wins, {result['losses']} losses, {result['ties']} ties; "
        f"paired bootstrap p = {test['bootstrap_p']}, paired t-test p = {test['t_test_p']} (n = {test['n']})"
    )


@app.command()
def apply(
    run_id: str,
    variant: str | None = typer.Option(None, help="Default: the sweep's best variant."),
    collection: str | None = typer.Option(None, help="Default: the run's (kept) collection."),
    api_url: str | None = ApiUrl,
    api_key: str | None = ApiKey,
) -> None:
    """Write a variant's retrieval settings into a collection's retrieval config."""
    with make_client(api_url, api_key) as client:
        result = check_response(
            client.post(f"/v1/evals/{run_id}/apply", json={"variant": variant, "collection": collection})
        )
    console.print(
        f"applied {result['variant']!r} to collection {result['collection_id']}: {result['retrieval']}"
    )


@app.command()
def retrieval(
    dataset: Path = typer.Option(..., exists=True, file_okay=False, help="BEIR folder (corpus.jsonl, ...)."),
    modes: str = typer.Option("bm25,dense,hybrid", help="Comma-separated: bm25, dense, hybrid."),
    collection: str | None = typer.Option(
        None,
        help="Evaluate this collection (holding the corpus, source_id = corpus _id) instead of ingesting.",
    ),
    max_queries: int | None = typer.Option(None, help="Evaluate only the first N judged queries."),
    output: Path = typer.Option(Path("retrieval-eval.json"), help="Where the JSON report goes."),
    api_url: str | None = ApiUrl,
    api_key: str | None = ApiKey,
) -> None:
    """BEIR retrieval evaluation per mode, as an eval run (a front door to `eval sweep --set mode=...`)."""
    wanted = [m.strip() for m in modes.split(",") if m.strip()]
    body = {
        "kind": "retrieval",
        "name": f"retrieval {dataset.name}",
        "collection": collection,
        "ingest": collection is None,
        "sweep": {"mode": wanted},
        "max_items": max_queries,
    }
    with make_client(api_url, api_key) as client:
        result = start(client, body, dataset, None, True)
    report = {
        "run_id": result["id"],
        "dataset": str(dataset),
        "modes": {
            label.removeprefix("mode="): m for label, m in result["metrics"].get("variants", {}).items()
        },
    }
    output.write_text(json.dumps(report, indent=2) + "\n")
    _finish(result, None)
    console.print(f"report written to {output}")
