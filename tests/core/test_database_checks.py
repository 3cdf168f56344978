"""Start-up refuses databases it cannot use, with messages that say what to do."""

import socket
import subprocess
import sys

import pytest

from core.database import DatabaseNotReady, _parse_version, check_database, make_engine

pytestmark = pytest.mark.integration

# The machine's stock PostgreSQL (Debian's, without pgvector) stands in for a server without the extension.
SYSTEM_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def _system_pg_without_pgvector() -> str:
    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=1).close()
    except OSError:
        pytest.skip("no PostgreSQL on 127.0.0.1:5432 to stand in for a server without pgvector")
    engine = make_engine(SYSTEM_PG_URL)
    with engine.connect() as conn:
        has_vector = conn.exec_driver_sql(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
        ).scalar()
    engine.dispose()
    if has_vector:
        pytest.skip("the PostgreSQL on 127.0.0.1:5432 has pgvector")
    return SYSTEM_PG_URL


def test_server_without_pgvector_is_refused_with_a_clear_message():
    url = _system_pg_without_pgvector()
    with pytest.raises(DatabaseNotReady, match="pgvector is not installed"):
        check_database(make_engine(url))


def test_unmigrated_database_is_refused(empty_database_url):
    with pytest.raises(DatabaseNotReady, match="not migrated.*groundwork db upgrade"):
        check_database(make_engine(empty_database_url))


def test_api_command_exits_with_the_message_on_an_unmigrated_database(empty_database_url, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "cli.main", "api"],
        env={"GROUNDWORK_DATABASE_URL": empty_database_url, "GROUNDWORK_DATA_DIR": str(tmp_path), "PATH": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "not migrated" in proc.stderr and "groundwork db upgrade" in proc.stderr


def test_migrated_database_passes_and_reports_pgvector_version(db_engine):
    assert check_database(db_engine) >= (0, 5, 0)


def test_pgvector_version_parsing():
    assert _parse_version("0.6.2") == (0, 6, 2)
    assert _parse_version("0.4.4") < (0, 5, 0) <= _parse_version("0.5.0")
