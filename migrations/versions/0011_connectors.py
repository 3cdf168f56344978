"""Connectors and their sync history; the `indexed_with_warnings` document status.

Revision ID: 0011_connectors
Revises: 0010_rate_limit_storage
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011_connectors"
down_revision: str | Sequence[str] | None = "0010_rate_limit_storage"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TENANT_MATCHES = "tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::uuid"
TABLES = ("connectors", "connector_syncs")


def _tenant_columns() -> list[sa.Column]:
    return [
        sa.Column(
            "collection_id", sa.UUID(), sa.ForeignKey("collections.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("tenant_id", sa.UUID(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False),
    ]


def upgrade() -> None:
    # NOTE: a new enum value cannot be used in the transaction that adds it; commit it on its own.
    with op.get_context().autocommit_block():
        op.execute("ALTER TYPE document_status ADD VALUE IF NOT EXISTS 'indexed_with_warnings'")
    op.create_table(
        "connectors",
        sa.Column("id", sa.UUID(), primary_key=True),
        *_tenant_columns(),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("config", postgresql.JSONB(), nullable=False),
        sa.Column("interval_s", sa.Integer(), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False, server_default=sa.true()),
        sa.Column("next_sync_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_sync_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("state", postgresql.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.UniqueConstraint("collection_id", "name"),
    )
    op.create_index("ix_connectors_collection_id", "connectors", ["collection_id"])
    op.create_index("ix_connectors_due", "connectors", ["enabled", "next_sync_at"])
    sync_status = postgresql.ENUM("queued", "running", "succeeded", "failed", name="sync_status")
    op.create_table(
        "connector_syncs",
        sa.Column("id", sa.UUID(), primary_key=True),
        sa.Column(
            "connector_id", sa.UUID(), sa.ForeignKey("connectors.id", ondelete="CASCADE"), nullable=False
        ),
        *_tenant_columns(),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("status", sync_status, nullable=False),
        *(
            sa.Column(n, sa.Integer(), nullable=False, server_default="0")
            for n in ("added", "changed", "removed", "unchanged", "failed")
        ),
        sa.Column(
            "job_id", sa.UUID(), sa.ForeignKey("ingestion_jobs.id", ondelete="SET NULL"), nullable=True
        ),
        sa.Column("details", postgresql.JSONB(), nullable=False, server_default=sa.text("'{}'::jsonb")),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_connector_syncs_connector_created", "connector_syncs", ["connector_id", "created_at"])
    for table in TABLES:
        op.create_index(f"ix_{table}_tenant_id", table, ["tenant_id"])
        # Rows written without a tenant_id (the worker) take their collection's (0005_hardening).
        op.execute(
            f"CREATE TRIGGER groundwork_fill_tenant BEFORE INSERT ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION groundwork_fill_tenant()"
        )
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            f"USING ({TENANT_MATCHES}) WITH CHECK ({TENANT_MATCHES})"
        )


def downgrade() -> None:
    op.drop_table("connector_syncs")
    op.drop_table("connectors")
    op.execute("DROP TYPE IF EXISTS sync_status")
    # NOTE: Postgres cannot drop an enum value; documents in it go back to plain `indexed`.
    op.execute("UPDATE documents SET status = 'indexed' WHERE status = 'indexed_with_warnings'")
