"""`groundwork agent run "task" --kind rewoo -c COLLECTION`: run an agent and stream its steps."""

from __future__ import annotations

import json

import typer
from rich.console import Console

from cli.ask import print_claims
from cli.http import ApiKey, ApiUrl, check_response, make_client

app = typer.Typer(help="Agents: ReAct, ReWOO and Plan-and-Execute over your collections.")
console = Console()


def _show(event: dict) -> None:
    kind = event["type"]
    if kind == "plan":
        console.print("[bold]plan[/bold]" + (" (revised)" if event.get("replanned") else ""))
        for i, step in enumerate(event["plan"], start=1):
            text = f"#{step['id']} {step['tool']}[{step['input']}]" if isinstance(step, dict) else step
            console.print(f"  {i}. {text}", markup=False)
    elif kind == "tool_call":
        console.print(f"[cyan]→ {event['name']}[/cyan] {json.dumps(event['arguments'])}", highlight=False)
    elif kind == "tool_result":
        console.print(f"  {event['output'][:300]}", style="dim", markup=False)
    elif kind == "llm":
        usage = event["usage"]
        console.print(
            f"  llm {event['node']}: {usage['prompt_tokens']}+{usage['completion_tokens']} tokens, "
            f"{event['ms']:.0f} ms",
            style="dim",
        )
    elif kind in ("stopped", "loop_guard"):
        console.print(f"[yellow]{kind}[/yellow] {event.get('detail') or event.get('name')}")
    elif kind == "escalation":
        console.print(f"[yellow]escalation[/yellow] {event['from']}: {event['reason']}", highlight=False)


@app.command()
def run(
    task: str = typer.Argument(..., help="What the agent should do."),
    kind: str = typer.Option("react", "--kind", "-k", help="react | rewoo | plan_execute"),
    collection: list[str] = typer.Option(
        [], "--collection", "-c", help="Collection (repeatable); all if none."
    ),
    tool: list[str] = typer.Option([], "--tool", "-t", help="Built-in tool to allow (repeatable)."),
    max_steps: int = typer.Option(6, help="Tool calls the run may make."),
    api_url: str = ApiUrl,
    api_key: str = ApiKey,
) -> None:
    """Start a run and print each step as it happens, then the answer and its sources."""
    body = {
        "agent": kind,
        "input": task,
        "collections": collection,
        "tools": tool,
        "stream": True,
        "budgets": {"max_steps": max_steps},
    }
    final: dict = {}
    with (
        make_client(api_url, api_key, timeout=900) as client,
        client.stream("POST", "/v1/agents/runs", json=body) as response,
    ):
        if response.status_code >= 400:
            response.read()
            check_response(response)
        for line in response.iter_lines():
            if line.startswith("data: "):
                event = json.loads(line.removeprefix("data: "))
                _show(event)
                if event["type"] in ("final", "requires_action"):
                    final = event
    if final.get("type") == "requires_action":
        console.print(f"[yellow]run {final['id']} waits for the caller:[/yellow] {final['required_action']}")
        return
    console.print(f"\n[bold]Answer:[/bold] {final.get('answer') or '(none)'}", highlight=False)
    print_claims(final.get("claims") or [])
    for citation in final.get("citations", []):
        span = f"chars {citation['char_start']}-{citation['char_end']}"
        console.print(f"  [{citation['number']}] {citation['title']} ({span})", markup=False)
    usage = final.get("usage", {})
    tokens = usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
    console.print(
        f"\nrun {final.get('id')} · {final.get('finish_reason')} · {usage.get('llm_calls', 0)} LLM calls · "
        f"{tokens} tokens · {final.get('active_s')} s",
        style="dim",
    )


@app.command()
def show(run_id: str, api_url: str = ApiUrl, api_key: str = ApiKey) -> None:
    """Print a run with its full trace as JSON."""
    with make_client(api_url, api_key) as client:
        console.print_json(json.dumps(check_response(client.get(f"/v1/agents/runs/{run_id}"))))
