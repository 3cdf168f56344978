"""Connector tables (migration 0011_connectors): a connector belongs to a collection and syncs a
source into it; each run leaves a row of history. Both carry the tenant (filled from the
collection by trigger) under row-level security, like documents."""

from __future__ import annotations

import enum
import uuid
from datetime import datetime

from sqlalchemy import Boolean, DateTime, ForeignKey, Index, Integer, String, Text, UniqueConstraint, func
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from core.models import Base, _enum, _tenant_column, _Timestamps, _uuid


class SyncStatus(enum.StrEnum):
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"


class Connector(_Timestamps, Base):
    __tablename__ = "connectors"
    __table_args__ = (
        UniqueConstraint("collection_id", "name"),
        Index("ix_connectors_due", "enabled", "next_sync_at"),
    )

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    collection_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("collections.id", ondelete="CASCADE"), index=True
    )
    tenant_id: Mapped[uuid.UUID] = _tenant_column()
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(16))  # web | git | folder
    config: Mapped[dict] = mapped_column(JSONB, default=dict)
    # None: synced only on request ("sync now"); else every this many seconds.
    interval_s: Mapped[int | None] = mapped_column(Integer)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    next_sync_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_sync_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # What the source said last time (e.g. the git commit synced).
    state: Mapped[dict] = mapped_column(JSONB, default=dict)


class ConnectorSync(Base):
    __tablename__ = "connector_syncs"
    __table_args__ = (Index("ix_connector_syncs_connector_created", "connector_id", "created_at"),)

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    connector_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("connectors.id", ondelete="CASCADE"))
    collection_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"))
    tenant_id: Mapped[uuid.UUID] = _tenant_column()
    trigger: Mapped[str] = mapped_column(String(16))  # manual | schedule
    status: Mapped[SyncStatus] = mapped_column(_enum(SyncStatus, "sync_status"))
    added: Mapped[int] = mapped_column(Integer, default=0)
    changed: Mapped[int] = mapped_column(Integer, default=0)
    removed: Mapped[int] = mapped_column(Integer, default=0)
    unchanged: Mapped[int] = mapped_column(Integer, default=0)
    failed: Mapped[int] = mapped_column(Integer, default=0)
    # The ingestion job that carries the added and changed items, and what was refused or failed.
    job_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("ingestion_jobs.id", ondelete="SET NULL"))
    details: Mapped[dict] = mapped_column(JSONB, default=dict)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
