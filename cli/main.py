"""The `groundwork` command."""

from __future__ import annotations

import importlib.metadata
import os
import sys

# NOTE: before anything imports torch. OpenMP threads that spin-wait starve each other (and the
# worker, the API and Postgres) on a small shared CPU; passive waiting measured 5x faster steps.
# Not for `groundwork engine`: a process that only serves the engine has one OpenMP team (the engine
# thread's, see AsyncLLMEngine._load), and passive waits made each of its parallel ops pay a futex
# wake-up: a 32-row SmolLM2 decode step took 58 ms instead of 40 (2 cores).
if sys.argv[1:2] != ["engine"]:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import typer  # noqa: E402

from cli import agent, ask, connectors, db, engine, ingest, keys, mcp, models, search, services, vllm
from cli import eval as eval_cli

app = typer.Typer(
    help="Groundwork: self-hosted RAG and agents with its own inference engine.", no_args_is_help=True
)
app.add_typer(db.app, name="db")
app.add_typer(models.app, name="models")
app.add_typer(keys.app, name="keys")
app.add_typer(engine.app, name="engine")
app.add_typer(vllm.app, name="vllm")
app.add_typer(ingest.jobs_app, name="jobs")
app.add_typer(connectors.app, name="connectors")
app.command(name="ingest")(ingest.ingest)
app.command(name="ask")(ask.ask)
app.command(name="search")(search.search)
app.add_typer(eval_cli.app, name="eval")
app.add_typer(agent.app, name="agent")
app.add_typer(mcp.app, name="mcp")
app.command()(services.up)
app.command()(services.api)
app.command()(services.worker)


@app.command()
def version() -> None:
    """Print the installed version."""
    typer.echo(importlib.metadata.version("groundwork"))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
