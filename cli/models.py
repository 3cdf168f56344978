"""`groundwork models ...`: the model registry."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from core.registry import PACKAGED_MODELS, ModelNotAvailable, packaged_files, verify_packaged

app = typer.Typer(help="Packaged models.", no_args_is_help=True)
console = Console()


@app.command("list")
def list_models() -> None:
    """List packaged models, their licences and whether they are installed."""
    table = Table("name", "format", "licence", "package", "installed", "description")
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
    console.print(table)


@app.command()
def verify() -> None:
    """Check every installed packaged model's sha256; exit 1 on any mismatch or missing model."""
    failed = False
    for model in PACKAGED_MODELS.values():
        try:
            path = verify_packaged(model)
            console.print(f"[green]ok[/] {model.name} {path}")
        except ModelNotAvailable as exc:
            failed = True
            console.print(f"[red]error[/] {exc}")
    raise typer.Exit(1 if failed else 0)
