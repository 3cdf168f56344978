"""`groundwork models ...`: packaged models, and the larger ones `models pull` fetches."""

from __future__ import annotations

import time

import typer
from rich.console import Console
from rich.table import Table

from core.catalog import PULLABLE_MODELS, PullFailed, pull, pulled_path
from core.registry import PACKAGED_MODELS, ModelNotAvailable, packaged_files, verify_packaged, verify_pulled
from core.settings import get_settings

app = typer.Typer(help="Packaged models, and models to pull.", no_args_is_help=True)
console = Console()


@app.command("list")
def list_models() -> None:
    """List packaged and pullable models, their licences and whether they are here."""
    models_dir = get_settings().model_cache_dir
    table = Table("name", "format", "licence", "from", "installed", "description")
    for model in PACKAGED_MODELS.values():
        try:
            packaged_files(model)
            installed = "yes"
        except ModelNotAvailable as exc:
            installed = f"no ({exc})"
        table.add_row(
            model.name,
            model.format,
            model.licence,
            f"{model.distribution}=={model.version}",
            installed,
            model.description,
        )
    for pullable in PULLABLE_MODELS.values():
        path = pulled_path(pullable, models_dir)
        table.add_row(
            pullable.name,
            "gguf",
            pullable.licence,
            f"{len(pullable.packages)} PyPI parts, {pullable.size / 1e9:.2f} GB",
            f"yes ({path})" if path else f"no (groundwork models pull {pullable.name})",
            pullable.description,
        )
    console.print(table)


@app.command("pull")
def pull_model(name: str = typer.Argument(..., help=f"One of: {', '.join(PULLABLE_MODELS)}.")) -> None:
    """Download a model into the models directory (settings.model_cache_dir), sha256-checked."""
    if name not in PULLABLE_MODELS:
        console.print(f"[red]error[/] unknown model {name!r}; pullable: {', '.join(PULLABLE_MODELS)}")
        raise typer.Exit(2)
    start = time.perf_counter()
    try:
        path = pull(PULLABLE_MODELS[name], get_settings().model_cache_dir, console.print)
    except PullFailed as exc:
        console.print(f"[red]error[/] {exc}")
        raise typer.Exit(1) from None
    console.print(f"[green]ok[/] {name} {path} ({time.perf_counter() - start:.0f} s)")
    console.print(f"use it: groundwork up --llm {name}   (or GROUNDWORK_LLM_MODEL={name})")


@app.command()
def verify() -> None:
    """Check every installed packaged model's and every pulled model's sha256; exit 1 on any mismatch
    or missing packaged model."""
    failed = False
    for model in PACKAGED_MODELS.values():
        try:
            path = verify_packaged(model)
            console.print(f"[green]ok[/] {model.name} {path}")
        except ModelNotAvailable as exc:
            failed = True
            console.print(f"[red]error[/] {exc}")
    models_dir = get_settings().model_cache_dir
    for pullable in PULLABLE_MODELS.values():
        if pulled_path(pullable, models_dir) is None:
            continue
        try:
            path = verify_pulled(pullable, models_dir)
            console.print(f"[green]ok[/] {pullable.name} {path}")
        except ModelNotAvailable as exc:
            failed = True
            console.print(f"[red]error[/] {exc}")
    raise typer.Exit(1 if failed else 0)
