"""Ingestion: per-document claim and heartbeat, so a dead worker's document can be detected and re-queued.

Revision ID: 0002_ingestion
Revises: 0001_core

"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_ingestion"
down_revision: str | Sequence[str] | None = "0001_core"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # The Celery task id that currently owns the document (NULL when nobody does).
    op.add_column("documents", sa.Column("claimed_by", sa.String(length=64), nullable=True))
    op.add_column("documents", sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True))
    # Claims so far: a document whose worker keeps dying (OOM on a hostile file) fails after N.
    op.add_column("documents", sa.Column("attempts", sa.Integer(), server_default="0", nullable=False))
    op.create_index("ix_documents_job_status", "documents", ["job_id", "status"], unique=False)
    op.create_index("ix_ingestion_jobs_status", "ingestion_jobs", ["status"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_ingestion_jobs_status", table_name="ingestion_jobs")
    op.drop_index("ix_documents_job_status", table_name="documents")
    op.drop_column("documents", "attempts")
    op.drop_column("documents", "heartbeat_at")
    op.drop_column("documents", "claimed_by")
