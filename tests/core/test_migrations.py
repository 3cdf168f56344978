import pytest
from alembic import command
from sqlalchemy import inspect, text

from cli.db import upgrade_database
from core.database import alembic_config, make_engine

pytestmark = pytest.mark.integration

CORE_TABLES = {"tenants", "api_keys", "collections", "documents", "chunks", "ingestion_jobs"}


def test_migrations_apply_to_empty_database_and_are_reversible(empty_database_url):
    engine = make_engine(empty_database_url)
    upgrade_database(empty_database_url)
    assert set(inspect(engine).get_table_names()) >= CORE_TABLES
    with engine.connect() as conn:
        assert conn.execute(text("SELECT name FROM tenants")).scalars().all() == ["default"]

    command.downgrade(alembic_config(empty_database_url), "base")
    assert not CORE_TABLES & set(inspect(engine).get_table_names())

    upgrade_database(empty_database_url)  # and forward again from base
    assert set(inspect(engine).get_table_names()) >= CORE_TABLES
    engine.dispose()


def test_models_and_migrations_agree(db_engine):
    """Every ORM change comes with its migration (autogenerate finds nothing to add)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from core.models import Base

    def declared(obj, name, type_, reflected, compare_to) -> bool:
        # Tables kept by SQL alone (BM25 postings, written by triggers) and per-collection HNSW
        # indexes built at run time are not ORM-declared; everything declared must match.
        table = obj if type_ == "table" else getattr(obj, "table", None)
        if table is not None and table.name not in Base.metadata.tables:
            return False
        return not (type_ == "index" and reflected and compare_to is None)

    with db_engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"include_object": declared})
        diff = compare_metadata(context, Base.metadata)
    assert diff == []
