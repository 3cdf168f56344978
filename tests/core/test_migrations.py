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
