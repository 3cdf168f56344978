"""`groundwork vllm install | serve`: vLLM as the platform's backend (inference/vllm_server.py)."""

from __future__ import annotations

import signal
import sys

import typer

from core.settings import get_settings
from core.telemetry import configure_logging

app = typer.Typer(help="vLLM as the platform's LLM backend (engine.backend = vllm).", no_args_is_help=True)


@app.command()
def install() -> None:
    """Build vLLM's own venv (engine.vllm.package; about 3.5 GB); skipped when it exists for these pins."""
    from inference.vllm_server import install as install_venv

    venv = install_venv(get_settings().engine.vllm, say=lambda line: typer.echo(line, err=True))
    typer.echo(str(venv))


@app.command()
def serve(port: int = typer.Option(None, help="Port (default: engine.vllm.port).")) -> None:
    """Run the supervised vLLM server on llm_model in the foreground (restarted if it dies)."""
    from inference.supervisor import ServerFailed, SupervisedServer
    from inference.vllm_server import VLLMNotInstalled, server_spec

    settings = get_settings()
    configure_logging(settings.log_level, settings.log_json)
    try:
        server = SupervisedServer(server_spec(settings, port))
    except VLLMNotInstalled as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(2) from None
    server.start()
    try:
        server.wait_ready()
    except ServerFailed as exc:
        server.stop()
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"vLLM serving {settings.llm_model} at {server.spec.health_url.removesuffix('/health')}/v1")
    server.supervise()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        signal.pause()
    finally:
        server.stop()
