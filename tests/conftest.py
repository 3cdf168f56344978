"""Session fixtures: one embedded Postgres (pgvector) per test session with a fresh migrated
database, settings pointing at it, a Redis broker on a unique queue, and a real Celery worker.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads; see cli/main.py

import pytest  # noqa: E402
import torch  # noqa: E402

from cli.db import upgrade_database
from core.database import make_engine, make_session_factory
from core.embedded_pg import start_embedded_postgres
from core.settings import Settings
from core.settings.connectors import ConnectorSettings
from ingestion.celery_app import create_celery
from retrieval.models import RetrievalModels
from tests.support.services import (
    REDIS_HOST,
    REDIS_PORT,
    WorkerProcess,
    create_database,
    drop_database,
    redis_reachable,
    unique_name,
)

torch.set_num_threads(min(2, os.cpu_count() or 1))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def pg_server():
    """The embedded PostgreSQL 16 + pgvector server (pgserver), shared by the session.

    NOTE: not under pytest's tmp dir: run as root, pgserver runs postgres as its own user, which
    must be able to reach the data directory (pytest's is private to root).
    """
    data_dir = Path(tempfile.mkdtemp(prefix="groundwork-test-pg-"))
    data_dir.chmod(0o755)
    _, server = start_embedded_postgres(data_dir, database="postgres")
    yield server
    server.cleanup()
    shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
def empty_database_url(pg_server):
    """A brand-new database with nothing in it (not even the vector extension)."""
    name = unique_name("gw_empty")
    yield create_database(pg_server, name)
    drop_database(pg_server, name)


@pytest.fixture(scope="session")
def database_url(pg_server) -> str:
    """The session's migrated database."""
    url = create_database(pg_server, unique_name("gw_test"))
    upgrade_database(url)
    return url


@pytest.fixture(scope="session")
def redis_url() -> str:
    if not redis_reachable():
        pytest.skip(f"no Redis at {REDIS_HOST}:{REDIS_PORT}: broker tests need one")
    return f"redis://{REDIS_HOST}:{REDIS_PORT}/0"


@pytest.fixture(scope="session")
def settings(tmp_path_factory, database_url) -> Settings:
    """Settings for the session's database; the broker is the embedded default (no Redis)."""
    return Settings(
        database_url=database_url,
        data_dir=tmp_path_factory.mktemp("data"),
        model_cache_dir=tmp_path_factory.mktemp("models"),
        celery_queue=unique_name("gwq"),
        log_json=False,
        # Connector tests crawl a loopback server and read temporary folders (ingestion/connectors).
        connectors=ConnectorSettings(
            allowed_private_networks=["127.0.0.0/8"],
            allowed_folders=[Path(tempfile.gettempdir())],
            scheduler_tick_s=1.0,
            min_interval_s=1,
        ),
    )


@pytest.fixture(scope="session")
def broker_settings(settings, redis_url) -> Settings:
    """Settings with Redis as the broker and result backend, on a queue of this session's own."""
    return settings.model_copy(update={"broker_url": redis_url, "result_backend": redis_url})


@pytest.fixture(scope="session")
def db_engine(database_url):
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def retrieval_models() -> RetrievalModels:
    """The test process's embedders and cross-encoders, loaded once (as a Platform holds them)."""
    return RetrievalModels()


@pytest.fixture(scope="session")
def session_factory(db_engine):
    return make_session_factory(db_engine)


@pytest.fixture(scope="session")
def celery_app(broker_settings, database_url):
    return create_celery(broker_settings, database_url)


@pytest.fixture(scope="session")
def celery_worker(broker_settings, database_url, celery_app, tmp_path_factory):
    """A real worker subprocess consuming this session's queue through Redis."""
    worker = WorkerProcess(broker_settings, database_url, tmp_path_factory.mktemp("worker") / "worker.log")
    worker.start()
    try:
        worker.wait_ready(celery_app, timeout=120)
        yield worker
    finally:
        worker.stop()
