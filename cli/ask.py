"""`groundwork ask "question" --collection NAME`: stream a grounded answer and its sources."""

from __future__ import annotations

import json

import typer
from rich.console import Console

from cli.http import ApiKey, ApiUrl, check_response, make_client

console = Console()


def ask(
    question: str = typer.Argument(..., help="The question."),
    collection: list[str] = typer.Option(
        ..., "--collection", "-c", help="Collection name or id (repeatable)."
    ),
    conversation: str = typer.Option(None, help="Continue this conversation id."),
    max_tokens: int = typer.Option(None, help="Answer length cap in tokens."),
    mode: str = typer.Option(
        None, "--mode", help="quote (verbatim source sentences), generate or auto (server default)."
    ),
    api_url: str = ApiUrl,
    api_key: str = ApiKey,
) -> None:
    """Ask the running platform; prints the answer as it is generated, then the numbered sources."""
    body = {"question": question, "collections": collection, "stream": True, "conversation_id": conversation}
    body["generation"] = {"max_tokens": max_tokens}
    if mode:
        body["answer_mode"] = mode
    done: dict = {}
    with make_client(api_url, api_key) as client, client.stream("POST", "/v1/ask", json=body) as response:
        if response.status_code >= 400:
            response.read()
            check_response(response)
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line.removeprefix("data: "))
            if event["type"] == "token":
                console.print(event["text"], end="", markup=False, highlight=False)
            elif event["type"] == "done":
                done = event
    console.print()
    if done.get("answer") and done["citations"]:
        console.print(f"\n[bold]Answer with citations:[/bold] {done['answer']}", markup=True, highlight=False)
    if done.get("fallback"):
        console.print(
            f"note: {done['fallback']}; sentences chosen by {done.get('quote_method')}", style="yellow"
        )
    print_claims(done.get("claims") or [])
    console.print("\n[bold]Sources[/bold]")
    for citation in done.get("citations", []):
        page = f", page {citation['page']}" if citation.get("page") else ""
        span = f"chars {citation['char_start']}-{citation['char_end']}"
        origin = f" — {citation['source_id']}" if citation.get("source_id") else ""
        console.print(f"  [{citation['citation']}] {citation['title']}{origin}{page} ({span})", markup=False)
    if not done.get("citations"):
        console.print("  (none cited)")
    tokens = done.get("usage", {}).get("completion_tokens", 0)
    total_ms = done.get("timings", {}).get("total_ms", 0)
    console.print(
        f"\nconversation {done.get('conversation_id')} · {tokens} tokens · {total_ms:.0f} ms", style="dim"
    )


_MARKS = {
    "supported": ("✓", "green"),
    "unsupported": ("✗ UNSUPPORTED", "bold red"),
    "unknown": ("?", "yellow"),
}


def print_claims(claims: list[dict]) -> None:
    """Each sentence of the answer with its verdict; unsupported ones stand out."""
    if not claims:
        return
    console.print("\n[bold]Checked sentences[/bold]")
    for claim in claims:
        mark, style = _MARKS[claim["verdict"]]
        console.print(f"  {mark} ", style=style, end="")
        console.print(
            claim["text"], markup=False, highlight=False, style=style if claim["supported"] is False else None
        )
