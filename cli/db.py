"""`groundwork db ...`: schema migrations."""

from __future__ import annotations

import typer
from alembic import command

from core.database import alembic_config, ensure_pgvector, make_engine
from core.runtime import open_database
from core.settings import get_settings

app = typer.Typer(help="Database schema.", no_args_is_help=True)


def upgrade_database(url: str, revision: str = "head") -> None:
    ensure_pgvector(make_engine(url))
    command.upgrade(alembic_config(url), revision)


@app.command()
def upgrade(revision: str = typer.Argument("head", help="Target revision.")) -> None:
    """Apply migrations up to REVISION (default: the latest)."""
    handle = open_database(get_settings())
    upgrade_database(handle.url, revision)
    typer.echo(f"database at {revision}")


@app.command()
def downgrade(revision: str = typer.Argument(..., help="Target revision, e.g. -1 or base.")) -> None:
    """Revert migrations down to REVISION."""
    handle = open_database(get_settings())
    command.downgrade(alembic_config(handle.url), revision)
    typer.echo(f"database at {revision}")


@app.command()
def current() -> None:
    """Show the database's current revision."""
    handle = open_database(get_settings())
    command.current(alembic_config(handle.url))
