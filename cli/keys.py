"""`groundwork keys ...`: API keys per tenant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import typer
from rich.console import Console
from rich.table import Table
from sqlalchemy import select

from core.database import make_engine, make_session_factory, session_scope
from core.models import ApiKey, Tenant
from core.runtime import open_database
from core.settings import get_settings
from core.tenancy import SCOPES, create_api_key, get_or_create_tenant, revoke_api_key

app = typer.Typer(help="API keys (tenants are created on first use).", no_args_is_help=True)
console = Console()


def _sessions():
    return make_session_factory(make_engine(open_database(get_settings()).url))


@app.command()
def create(
    name: str,
    tenant: str = typer.Option("default", help="Tenant name."),
    scope: list[str] = typer.Option(
        None, "--scope", help=f"Repeat for several: {', '.join(SCOPES)} (default: all)."
    ),
    expires_days: float = typer.Option(None, "--expires-days", help="Days until the key stops working."),
) -> None:
    """Create a key; it is printed once and cannot be shown again."""
    expires = datetime.now(UTC) + timedelta(days=expires_days) if expires_days else None
    with session_scope(_sessions()) as session:
        try:
            _, plain = create_api_key(
                session, get_or_create_tenant(session, tenant), name, scope or None, expires
            )
        except ValueError as exc:
            typer.secho(f"error: {exc}", fg="red", err=True)
            raise typer.Exit(2) from None
    typer.echo(plain)


@app.command("list")
def list_keys() -> None:
    """List keys (prefix, tenant, state)."""
    table = Table("prefix", "name", "tenant", "scopes", "created", "expires", "last used", "revoked")
    with session_scope(_sessions()) as session:
        rows = session.execute(select(ApiKey, Tenant.name).join(Tenant).order_by(ApiKey.created_at)).all()
        for key, tenant in rows:
            table.add_row(
                key.prefix,
                key.name,
                tenant,
                ",".join(key.scopes),
                str(key.created_at),
                str(key.expires_at or ""),
                str(key.last_used_at or ""),
                str(key.revoked_at or ""),
            )
    console.print(table)


@app.command()
def revoke(prefix: str) -> None:
    """Revoke the live keys with this prefix."""
    with session_scope(_sessions()) as session:
        count = revoke_api_key(session, prefix)
    if not count:
        typer.secho(f"no live key with prefix {prefix!r}", fg="red", err=True)
        raise typer.Exit(1)
    typer.echo(f"revoked {count} key(s)")
