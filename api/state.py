"""What the API process holds for its lifetime: database, session factory, Celery app."""

from __future__ import annotations

from dataclasses import dataclass, field

from celery import Celery
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from core.runtime import DatabaseHandle
from core.settings import Settings


@dataclass
class AppState:
    settings: Settings
    database: DatabaseHandle
    engine: Engine
    sessions: sessionmaker[Session]
    celery: Celery
    pgvector_version: tuple[int, ...]
    extras: dict = field(default_factory=dict)  # lazily built heavy objects (embedders, engines)

    @property
    def llm(self):  # STUB until the h-platform merge
        from api.llm import provider

        return provider(self)


async def close_services(state: AppState) -> None:
    """Stop the services `extras` holds (at shutdown); those with `aclose` are waited for."""
    for service in state.extras.values():
        if hasattr(service, "aclose"):
            await service.aclose()
        elif hasattr(service, "shutdown"):
            service.shutdown()
