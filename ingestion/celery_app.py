"""The Celery application. Broker and result backend come from settings:

- `GROUNDWORK_BROKER_URL=redis://...`: Redis (production, and the tests).
- unset: kombu's SQLAlchemy transport on the platform's own Postgres, so the embedded default needs
  no broker server. Results go to the same database unless `GROUNDWORK_RESULT_BACKEND` is set.
"""

from __future__ import annotations

import os

from celery import Celery
from sqlalchemy import create_engine

from core.database import sqlalchemy_url
from core.settings import Settings
from retrieval.models import RetrievalModels

TASK_MODULES = ["ingestion.tasks", "ingestion.connectors.tasks", "evals.tasks"]


def broker_urls(settings: Settings, database_url: str) -> tuple[str, str]:
    db = sqlalchemy_url(database_url)
    broker = settings.broker_url or f"sqla+{db}"
    if settings.result_backend:
        backend = settings.result_backend
    elif broker.startswith(("redis://", "rediss://")):
        backend = broker
    else:
        backend = f"db+{db}"
    return broker, backend


def prepare_broker_tables(broker: str, backend: str) -> None:
    """Create the SQLAlchemy transport's and result backend's tables up front.

    NOTE: kombu and Celery create them lazily, and a client and a worker starting together race on
    CREATE TABLE; creating them once before either starts avoids that.
    """
    if broker.startswith("sqla+"):
        from kombu.transport.sqlalchemy.models import metadata as kombu_metadata

        engine = create_engine(broker.removeprefix("sqla+"))
        kombu_metadata.create_all(engine)
        engine.dispose()
    if backend.startswith("db+"):
        from celery.backends.database.session import ResultModelBase

        engine = create_engine(backend.removeprefix("db+"))
        ResultModelBase.metadata.create_all(engine)
        engine.dispose()


def create_celery(settings: Settings, database_url: str) -> Celery:
    broker, backend = broker_urls(settings, database_url)
    app = Celery("groundwork", broker=broker, backend=backend, include=TASK_MODULES)
    app.conf.update(
        task_default_queue=settings.celery_queue,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        # Results are never read (progress lives in the database) except the health task's.
        task_ignore_result=True,
        broker_connection_retry_on_startup=True,
        # NOTE: a hung parser must not hold a worker forever (the heartbeat would keep it "alive"):
        # the soft limit fails the current document, the hard limit kills the process.
        task_soft_time_limit=settings.ingestion.task_soft_time_limit_s,
        task_time_limit=settings.ingestion.task_time_limit_s,
        # NOTE: the SQLAlchemy transport hands every transport option to create_engine(), so
        # only Redis gets them.
        broker_transport_options={"visibility_timeout": 3600} if broker.startswith("redis") else {},
        worker_hijack_root_logger=False,
    )
    app.conf.groundwork_settings = settings
    app.conf.groundwork_database_url = database_url
    return app


def worker_models(app: Celery) -> RetrievalModels:
    """The worker process's retrieval models (on `ingestion.device`), built on first use and kept on
    its Celery app: its ingestion tasks and its evaluations (usecases.platform.worker_platform)
    share them. NOTE: per process id, like every per-process object of a prefork worker."""
    held: tuple[int, RetrievalModels] | None = getattr(app, "groundwork_models", None)
    if held is None or held[0] != os.getpid():
        held = (os.getpid(), RetrievalModels(app.conf.groundwork_settings.ingestion.device))
        app.groundwork_models = held
    return held[1]
