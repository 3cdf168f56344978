"""The one `Platform` of a process: what the API, a worker and the CLI hold for their lifetime,
built once at start from the one `Settings` and closed on shutdown (usecases/README.md)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from celery import Celery
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from agents.mcp import McpPool
from core.database import check_database, make_engine, make_session_factory
from core.runtime import DatabaseHandle, open_database
from core.settings import Settings
from core.tenancy import install_tenant_scoping
from inference.provider import LLMProvider
from ingestion.celery_app import create_celery, worker_models
from retrieval.models import RetrievalModels


@dataclass
class Platform:
    settings: Settings
    database: DatabaseHandle
    engine: Engine  # the database's (SQLAlchemy); the LLM's engines live in `llm`
    sessions: sessionmaker[Session]
    celery: Celery
    pgvector_version: tuple[int, ...]
    llm: LLMProvider  # NOTE: built here, cheap; it starts an in-process engine on first use only
    models: RetrievalModels  # embedders and cross-encoders, each loaded on first use
    mcp_pool: McpPool  # agents' MCP server connections, opened on first use

    def close(self) -> None:
        """Stop what the platform started, without waiting for the MCP servers to end (see `aclose`)."""
        self.mcp_pool.shutdown()
        self.llm.shutdown()
        self.engine.dispose()

    async def aclose(self) -> None:
        """Stop what the platform started, the MCP servers' connections waited for (the app's shutdown)."""
        await self.mcp_pool.aclose()
        self.close()


def build_platform(
    settings: Settings,
    database: DatabaseHandle | None = None,
    celery: Celery | None = None,
    models: RetrievalModels | None = None,
) -> Platform:
    """Connect to everything; raises DatabaseNotReady with a clear message. `celery` and `models`: a
    worker's own app and the models its ingestion tasks share."""
    database = database or open_database(settings)
    engine = make_engine(database.url)
    pgvector_version = check_database(engine)
    sessions = make_session_factory(engine)
    install_tenant_scoping(sessions)  # row-level security for every tenant transaction
    return Platform(
        settings=settings,
        database=database,
        engine=engine,
        sessions=sessions,
        celery=celery or create_celery(settings, database.url),
        pgvector_version=pgvector_version,
        llm=LLMProvider(settings),
        models=models or RetrievalModels(),
        mcp_pool=McpPool(settings.mcp),
    )


def worker_platform(app: Celery) -> Platform:
    """The platform of this worker process, built on its first task and kept on its Celery app.

    NOTE: per process id: prefork children must not share their parent's database connections or
    engines, so a child that inherited its parent's platform builds its own.
    """
    held: tuple[int, Platform] | None = getattr(app, "groundwork_platform", None)
    if held is None or held[0] != os.getpid():
        settings = app.conf.groundwork_settings
        if settings.ingestion.torch_threads:
            import torch

            torch.set_num_threads(settings.ingestion.torch_threads)
        database = DatabaseHandle(app.conf.groundwork_database_url, embedded=False)
        held = (os.getpid(), build_platform(settings, database, celery=app, models=worker_models(app)))
        app.groundwork_platform = held
    return held[1]
