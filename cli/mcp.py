"""`groundwork mcp serve --stdio`: the platform as an MCP server for hosts that launch a command."""

from __future__ import annotations

import anyio
import typer

from core.errors import ClientError
from core.settings import get_settings
from core.telemetry import configure_logging

app = typer.Typer(help="MCP: serve the collections and agents to MCP hosts.", no_args_is_help=True)


@app.command()
def serve(
    stdio: bool = typer.Option(False, "--stdio", help="Serve over stdin/stdout (the host launches us)."),
    key: str = typer.Option(
        None, "--key", envvar="GROUNDWORK_API_KEY", help="The API key to act for (as for REST)."
    ),
) -> None:
    """Serve MCP over stdio; over HTTP the API already serves it at /mcp (`groundwork api`)."""
    if not stdio:
        typer.secho("over HTTP, `groundwork api` serves MCP at /mcp; give --stdio here", fg="red", err=True)
        raise typer.Exit(2)
    from api.mcp.stdio import serve_stdio  # NOTE: loads the API's stack; keep `--help` fast

    settings = get_settings()
    configure_logging(settings.log_level, settings.log_json)  # stderr: stdout is the protocol's
    try:
        anyio.run(serve_stdio, settings, key)
    except ClientError as exc:
        typer.secho(f"error: {exc.message}", fg="red", err=True)
        raise typer.Exit(2) from None
