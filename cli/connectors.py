"""`groundwork connectors ...`: configure and sync a collection's sources over the API."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from cli.http import ApiKey, ApiUrl, check_response, make_client

app = typer.Typer(help="Connectors: web sites, git repositories, server folders.", no_args_is_help=True)
console = Console()


@app.command()
def add(
    collection: str,
    name: str,
    kind: str = typer.Option(..., help="web, git or folder."),
    config: str = typer.Option(..., help='JSON, e.g. \'{"start_url": "https://docs.example.org/"}\'.'),
    every: int = typer.Option(None, "--every", help="Re-sync every this many seconds (default: manual)."),
    api_url: str = ApiUrl,
    api_key: str = ApiKey,
) -> None:
    """Add a connector to COLLECTION."""
    try:
        parsed = json.loads(config)
    except ValueError as exc:
        raise typer.BadParameter(f"--config is not JSON: {exc}") from None
    body = {"name": name, "kind": kind, "config": parsed, "interval_s": every}
    with make_client(api_url, api_key) as client:
        row = check_response(client.post(f"/v1/collections/{collection}/connectors", json=body))
    typer.echo(row["id"])


@app.command("list")
def list_connectors(collection: str, api_url: str = ApiUrl, api_key: str = ApiKey) -> None:
    """The collection's connectors with their last sync."""
    with make_client(api_url, api_key) as client:
        rows = check_response(client.get(f"/v1/collections/{collection}/connectors"))
    table = Table("id", "name", "kind", "every (s)", "enabled", "last sync", "added/changed/removed")
    for row in rows:
        last = row["last_sync"] or {}
        counts = f"{last.get('added', '-')}/{last.get('changed', '-')}/{last.get('removed', '-')}"
        table.add_row(
            row["id"],
            row["name"],
            row["kind"],
            str(row["interval_s"] or "manual"),
            str(row["enabled"]),
            last.get("status", "never"),
            counts,
        )
    console.print(table)


@app.command()
def sync(connector_id: str, api_url: str = ApiUrl, api_key: str = ApiKey) -> None:
    """Sync now (queued; follow it with `groundwork connectors history`)."""
    with make_client(api_url, api_key) as client:
        row = check_response(client.post(f"/v1/connectors/{connector_id}/sync"))
    typer.echo(row["id"])


@app.command()
def history(connector_id: str, api_url: str = ApiUrl, api_key: str = ApiKey) -> None:
    """The connector's recent syncs."""
    with make_client(api_url, api_key) as client:
        rows = check_response(client.get(f"/v1/connectors/{connector_id}/syncs"))
    table = Table(
        "started", "trigger", "status", "added", "changed", "removed", "unchanged", "failed", "s", "error"
    )
    for r in rows:
        table.add_row(
            str(r["started_at"] or r["created_at"]),
            r["trigger"],
            r["status"],
            *(str(r[k]) for k in ("added", "changed", "removed", "unchanged", "failed")),
            str(r["duration_s"] or ""),
            r["error"] or "",
        )
    console.print(table)


@app.command()
def remove(connector_id: str, api_url: str = ApiUrl, api_key: str = ApiKey) -> None:
    """Delete the connector and its history (its documents stay)."""
    with make_client(api_url, api_key) as client:
        check_response(client.delete(f"/v1/connectors/{connector_id}"))
