"""The core schema. Every table is scoped by tenant (directly or through its collection), so a
query that filters on the collection cannot leak another tenant's rows.
"""

from __future__ import annotations

import enum
import uuid
from datetime import datetime

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    DateTime,
    Enum,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

ALL_SCOPES = '["admin", "write", "read"]'


def _tenant_column() -> Mapped[uuid.UUID]:
    """Migration 0005_hardening: the owning tenant, denormalised so that row-level security can key
    on it (filled from the collection by a trigger when an insert leaves it out)."""
    return mapped_column(ForeignKey("tenants.id", ondelete="CASCADE", name=None), index=True)


class Base(DeclarativeBase):
    pass


def _uuid() -> uuid.UUID:
    return uuid.uuid4()


class _Timestamps:
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.now(), onupdate=func.now()
    )


class DocumentStatus(enum.StrEnum):
    queued = "queued"
    parsing = "parsing"
    chunking = "chunking"
    embedding = "embedding"
    indexed = "indexed"
    # Indexed, but the text-yield check found far less text than the file's size suggests
    # (migration 0011_connectors; the reasons are in metadata["warnings"]).
    indexed_with_warnings = "indexed_with_warnings"
    failed = "failed"


class JobStatus(enum.StrEnum):
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"  # every document failed, or the job itself broke
    cancelled = "cancelled"


def _enum(cls: type[enum.Enum], name: str) -> Enum:
    return Enum(cls, name=name, values_callable=lambda e: [m.value for m in e])


class Tenant(_Timestamps, Base):
    __tablename__ = "tenants"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    name: Mapped[str] = mapped_column(String(200), unique=True)


class ApiKey(_Timestamps, Base):
    __tablename__ = "api_keys"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    # NOTE: only a SHA-256 of the key is stored; the prefix lets a user tell keys apart.
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Migration 0005_hardening: what the key may do (read, write, admin) and when it stops working.
    scopes: Mapped[list] = mapped_column(
        JSONB, default=lambda: ["admin", "write", "read"], server_default=text(f"'{ALL_SCOPES}'::jsonb")
    )
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Collection(_Timestamps, Base):
    __tablename__ = "collections"
    __table_args__ = (UniqueConstraint("tenant_id", "name"),)

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")
    embedding_model: Mapped[str] = mapped_column(String(500))
    embedding_dim: Mapped[int] = mapped_column(Integer)
    # Matryoshka: the prefix length that the HNSW index covers (<= embedding_dim).
    index_dim: Mapped[int] = mapped_column(Integer)
    chunking: Mapped[dict] = mapped_column(JSONB, default=dict)
    retrieval: Mapped[dict] = mapped_column(JSONB, default=dict)

    documents: Mapped[list[Document]] = relationship(back_populates="collection", passive_deletes=True)


class Document(_Timestamps, Base):
    __tablename__ = "documents"
    __table_args__ = (
        # NOTE: one live row per (collection, source id); older versions are replaced in place.
        UniqueConstraint("collection_id", "source_id"),
        Index("ix_documents_collection_hash", "collection_id", "content_hash"),
        Index("ix_documents_collection_status", "collection_id", "status"),
        Index("ix_documents_job_status", "job_id", "status"),  # migration 0002_ingestion
    )

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    collection_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"))
    tenant_id: Mapped[uuid.UUID] = _tenant_column()
    source_id: Mapped[str] = mapped_column(String(1000))
    title: Mapped[str] = mapped_column(String(1000), default="")
    mime_type: Mapped[str | None] = mapped_column(String(200))
    size_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    content_hash: Mapped[str] = mapped_column(String(64))
    status: Mapped[DocumentStatus] = mapped_column(_enum(DocumentStatus, "document_status"))
    version: Mapped[int] = mapped_column(Integer, default=1)
    metadata_: Mapped[dict] = mapped_column("metadata", JSONB, default=dict)
    error: Mapped[str | None] = mapped_column(Text)
    # Where the uploaded bytes live until they are parsed (blob store key).
    blob_key: Mapped[str | None] = mapped_column(String(200))
    job_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("ingestion_jobs.id", ondelete="SET NULL"))
    # Ingestion ownership (migration 0002_ingestion): the Celery task id working on the document, its
    # last sign of life, and how many times a worker claimed it (see ingestion/README.md, recovery).
    claimed_by: Mapped[str | None] = mapped_column(String(64))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")

    collection: Mapped[Collection] = relationship(back_populates="documents")


class Chunk(Base):
    __tablename__ = "chunks"
    __table_args__ = (
        UniqueConstraint("document_id", "ordinal"),
        Index("ix_chunks_collection_text_hash", "collection_id", "text_hash"),
    )

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    document_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"), index=True)
    # Denormalised so that search filters on one column and an index can be partial per collection.
    collection_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"))
    tenant_id: Mapped[uuid.UUID] = _tenant_column()
    ordinal: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    text_hash: Mapped[str] = mapped_column(String(64))
    token_count: Mapped[int] = mapped_column(Integer)
    char_start: Mapped[int] = mapped_column(Integer)
    char_end: Mapped[int] = mapped_column(Integer)
    page: Mapped[int | None] = mapped_column(Integer)
    heading_path: Mapped[list] = mapped_column(JSONB, default=list)
    metadata_: Mapped[dict] = mapped_column("metadata", JSONB, default=dict)
    # Full-dimension normalised embedding; the dimension is the collection's (untyped column).
    embedding: Mapped[list[float] | None] = mapped_column(Vector())
    # Re-normalised Matryoshka prefix that the per-collection HNSW index covers.
    embedding_prefix: Mapped[list[float] | None] = mapped_column(Vector())
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class IngestionJob(_Timestamps, Base):
    __tablename__ = "ingestion_jobs"
    __table_args__ = (Index("ix_ingestion_jobs_status", "status"),)  # migration 0002_ingestion

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    collection_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("collections.id", ondelete="CASCADE"), index=True
    )
    tenant_id: Mapped[uuid.UUID] = _tenant_column()
    status: Mapped[JobStatus] = mapped_column(_enum(JobStatus, "job_status"))
    # Per-stage counters, e.g. {"parsing": {"done": 3, "failed": 1}, ...}.
    stages: Mapped[dict] = mapped_column(JSONB, default=dict)
    documents_total: Mapped[int] = mapped_column(Integer, default=0)
    documents_done: Mapped[int] = mapped_column(Integer, default=0)
    documents_failed: Mapped[int] = mapped_column(Integer, default=0)
    chunks_embedded: Mapped[int] = mapped_column(Integer, default=0)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    error: Mapped[str | None] = mapped_column(Text)
    # Migration 0005_hardening, the outbox flag: None until the job's messages reached the broker;
    # the reaper re-sends queued documents of jobs left unsent (ingestion/recovery.py).
    enqueued_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Conversation(_Timestamps, Base):
    __tablename__ = "conversations"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    collection_ids: Mapped[list] = mapped_column(JSONB, default=list)
    title: Mapped[str] = mapped_column(String(500), default="")

    messages: Mapped[list[Message]] = relationship(
        back_populates="conversation", order_by="Message.created_at", passive_deletes=True
    )


class Message(Base):
    __tablename__ = "messages"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    conversation_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    role: Mapped[str] = mapped_column(String(16))  # user | assistant
    content: Mapped[str] = mapped_column(Text)
    # Assistant messages: the query retrieval ran, the citations, token usage and stage timings.
    query: Mapped[str | None] = mapped_column(Text)
    citations: Mapped[list] = mapped_column(JSONB, default=list)
    usage: Mapped[dict] = mapped_column(JSONB, default=dict)
    timings: Mapped[dict] = mapped_column(JSONB, default=dict)
    # quote | generate, and the per-sentence claim check (migration 0008_answer_claims).
    answer_mode: Mapped[str | None] = mapped_column(String(16))
    claims: Mapped[list | None] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.clock_timestamp()
    )

    conversation: Mapped[Conversation] = relationship(back_populates="messages")


class AgentRun(_Timestamps, Base):
    """One agent run (migration 0006_agents). The LangGraph checkpoints hold its resumable state;
    this row holds what users read: status, plan, trace, pending client calls, answer, usage."""

    __tablename__ = "agent_runs"
    __table_args__ = (
        Index("ix_agent_runs_tenant_created", "tenant_id", "created_at"),
        Index("ix_agent_runs_status", "status"),
    )

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    agent: Mapped[str] = mapped_column(String(32))  # react | rewoo | plan_execute
    # queued | running | requires_action | completed | failed | cancelled
    status: Mapped[str] = mapped_column(String(32))
    input: Mapped[str] = mapped_column(Text)
    collection_ids: Mapped[list] = mapped_column(JSONB, default=list)
    tools: Mapped[list] = mapped_column(JSONB, default=list)  # enabled built-in tool names
    client_tools: Mapped[list] = mapped_column(JSONB, default=list)  # caller-run OpenAI function tools
    mcp_servers: Mapped[list] = mapped_column(JSONB, default=list)  # allowlisted MCP servers (0012)
    budgets: Mapped[dict] = mapped_column(JSONB, default=dict)
    review_plan: Mapped[bool] = mapped_column(default=False)
    plan: Mapped[list] = mapped_column(JSONB, default=list)
    trace: Mapped[list] = mapped_column(JSONB, default=list)
    required_action: Mapped[dict] = mapped_column(JSONB, default=dict)  # the interrupt awaiting the caller
    answer: Mapped[str | None] = mapped_column(Text)
    citations: Mapped[list] = mapped_column(JSONB, default=list)
    usage: Mapped[dict] = mapped_column(JSONB, default=dict)
    finish_reason: Mapped[str | None] = mapped_column(String(32))  # answered | budget_exhausted | ...
    detail: Mapped[str | None] = mapped_column(Text)
    active_s: Mapped[float] = mapped_column(default=0.0)  # time spent running, for the wall-clock budget
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The lease of the segment working on it (core/durable.py, migration 0013_durable_leases).
    claimed_by: Mapped[str | None] = mapped_column(String(64))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class EvalRun(_Timestamps, Base):
    """One evaluation job (migration 0007_evals); see evals/README.md."""

    __tablename__ = "eval_runs"
    __table_args__ = (Index("ix_eval_runs_tenant_created", "tenant_id", "created_at"),)

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200), default="")
    kind: Mapped[str] = mapped_column(String(16))  # retrieval | answer
    status: Mapped[JobStatus] = mapped_column(_enum(JobStatus, "job_status"))
    collection_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("collections.id", ondelete="SET NULL"))
    # Dataset reference ({"path", "format", "split"}), the variants to evaluate (retrieval overrides,
    # one per sweep point) and anything else the kind needs.
    dataset: Mapped[dict] = mapped_column(JSONB, default=dict)
    config: Mapped[dict] = mapped_column(JSONB, default=dict)
    # Progress: {"stage": "ingesting"|"evaluating"|..., "done", "total"}; worker bookkeeping.
    progress: Mapped[dict] = mapped_column(JSONB, default=dict)
    items_total: Mapped[int] = mapped_column(Integer, default=0)
    items_done: Mapped[int] = mapped_column(Integer, default=0)
    metrics: Mapped[dict] = mapped_column(JSONB, default=dict)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    # The lease (core/durable.py): the task delivery holding the run (0013_durable_leases).
    claimed_by: Mapped[str | None] = mapped_column(String(64))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    error: Mapped[str | None] = mapped_column(Text)


class EvalItem(Base):
    """One evaluated item of a run and variant; written once (the unique key makes a second
    evaluation of the same item an error, never a silent duplicate)."""

    __tablename__ = "eval_items"
    __table_args__ = (UniqueConstraint("run_id", "variant", "item_key"),)

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    run_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("eval_runs.id", ondelete="CASCADE"))
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"))
    variant: Mapped[str] = mapped_column(String(200))
    item_key: Mapped[str] = mapped_column(String(500))
    query: Mapped[str] = mapped_column(Text)
    # retrieval: {"ranked": [[doc id, score], ...]}; answer: {"answer", "citations", "cited_docs", ...}
    output: Mapped[dict] = mapped_column(JSONB, default=dict)
    metrics: Mapped[dict] = mapped_column(JSONB, default=dict)
    latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    tokens: Mapped[int] = mapped_column(Integer, default=0)
    worker: Mapped[str] = mapped_column(String(100), default="")  # who evaluated it (pid@host)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class MessageFeedback(_Timestamps, Base):
    """A user's verdict on an answer message (migration 0007_evals)."""

    __tablename__ = "message_feedback"

    id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True, default=_uuid)
    tenant_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    message_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("messages.id", ondelete="CASCADE"), index=True)
    rating: Mapped[str] = mapped_column(String(8))  # up | down
    comment: Mapped[str] = mapped_column(Text, default="")
    corrected_answer: Mapped[str | None] = mapped_column(Text)


class RateLimitCounter(Base):
    """A counter of the Postgres rate-limit storage (api/limit_storage.py; migration 0010): one row a
    key and window, gone once `expires_at` (epoch seconds) has passed. Unlogged: counters are worth
    nothing after a crash."""

    __tablename__ = "rate_limit_counters"
    __table_args__ = {"prefixes": ["UNLOGGED"]}

    key: Mapped[str] = mapped_column(String(300), primary_key=True)
    count: Mapped[int] = mapped_column(BigInteger)
    expires_at: Mapped[float] = mapped_column(Float, index=True)


class RateLimitEntry(Base):
    """One admitted hit of a moving-window limit (api/limit_storage.py; migration 0010)."""

    __tablename__ = "rate_limit_entries"
    __table_args__ = (Index("ix_rate_limit_entries_key_at", "key", "at"), {"prefixes": ["UNLOGGED"]})

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(String(300))
    at: Mapped[float] = mapped_column(Float)
