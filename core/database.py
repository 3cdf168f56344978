"""Database engine, sessions and the start-up checks that refuse a database we cannot use."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import Session, sessionmaker

MIN_PGVECTOR = (0, 5, 0)
MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


class DatabaseNotReady(RuntimeError):
    """The database cannot serve Groundwork; the message says what to do."""


def sqlalchemy_url(url: str) -> str:
    """Pin the psycopg 3 driver whatever form of postgres URL the user gave."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    raise DatabaseNotReady(f"unsupported database URL {url!r}: expected postgresql://...")


def make_engine(url: str, **kwargs) -> Engine:
    kwargs.setdefault("pool_pre_ping", True)
    # Concurrent answers each hold a connection while they retrieve; 15 (SQLAlchemy's default) ran
    # out at 20 concurrent /v1/ask requests. Postgres' default max_connections is 100.
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 30)
    return create_engine(sqlalchemy_url(url), **kwargs)


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session that commits on success and rolls back on error."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def alembic_config(url: str) -> AlembicConfig:
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", sqlalchemy_url(url).replace("%", "%%"))
    return cfg


def _parse_version(raw: str) -> tuple[int, ...]:
    return tuple(int(part) for part in raw.split(".")[:3] if part.isdigit())


def ensure_pgvector(engine: Engine) -> tuple[int, ...]:
    """Create the vector extension if allowed and return its version; refuse < 0.5."""
    with engine.begin() as conn:
        available = conn.execute(
            text("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")
        ).scalar()
        if available is None:
            raise DatabaseNotReady(
                "pgvector is not installed on this PostgreSQL server (CREATE EXTENSION vector is "
                "impossible). Install pgvector >= 0.5 on the server, or unset GROUNDWORK_DATABASE_URL "
                "to use the embedded database."
            )
        try:
            conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
        except Exception as exc:  # permission denied, typically
            raise DatabaseNotReady(f"CREATE EXTENSION vector failed: {type(exc).__name__}: {exc}") from exc
        version = _parse_version(
            conn.execute(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")).scalar_one()
        )
    if version < MIN_PGVECTOR:
        raise DatabaseNotReady(
            f"pgvector {'.'.join(map(str, version))} is too old: Groundwork needs >= 0.5 "
            "(ALTER EXTENSION vector UPDATE after upgrading the package)."
        )
    return version


def migration_heads() -> set[str]:
    return set(ScriptDirectory.from_config(alembic_config("postgresql://x")).get_heads())


def check_migrated(engine: Engine) -> None:
    """Refuse to run on a database whose schema is not at the latest migration."""
    with engine.connect() as conn:
        current = set(MigrationContext.configure(conn).get_current_heads())
    heads = migration_heads()
    if current != heads:
        have = ", ".join(sorted(current)) or "none"
        raise DatabaseNotReady(
            f"the database schema is not migrated (at revision {have}, need {', '.join(sorted(heads))}). "
            "Run `groundwork db upgrade`."
        )


def check_database(engine: Engine) -> tuple[int, ...]:
    """Everything start-up needs from the database; returns the pgvector version."""
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        raise DatabaseNotReady(f"cannot connect to the database: {exc.__class__.__name__}: {exc}") from exc
    version = ensure_pgvector(engine)
    check_migrated(engine)
    return version
