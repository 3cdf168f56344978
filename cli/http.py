"""HTTP access to a running Groundwork API, shared by the commands that talk to it."""

from __future__ import annotations

import httpx
import typer
from rich.console import Console

from core.settings import get_settings

ApiUrl = typer.Option(None, "--api-url", help="Base URL of the API (default: settings api_host:api_port).")
ApiKey = typer.Option(None, "--api-key", envvar="GROUNDWORK_API_KEY", help="API key (Bearer).")

_console = Console(stderr=True)


def make_client(api_url: str | None, api_key: str | None, timeout: float = 300) -> httpx.Client:
    settings = get_settings()
    url = api_url or f"http://{settings.api_host}:{settings.api_port}"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(base_url=url, headers=headers, timeout=timeout)


def check_response(response: httpx.Response) -> dict:
    """The JSON body, or exit 2 printing the API's error message."""
    if response.status_code >= 400:
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = response.text
        _console.print(f"[red]error {response.status_code}:[/red] {message}")
        raise typer.Exit(2)
    return response.json() if response.content else {}
