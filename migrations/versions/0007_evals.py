"""Evaluation runs, their per-item results, and feedback on answers.

Revision ID: 0007
Revises: 0004
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006_agents"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSONB = postgresql.JSONB(astext_type=sa.Text())
JOB_STATUS = postgresql.ENUM(name="job_status", create_type=False)


def _timestamps() -> list[sa.Column]:
    return [
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "eval_runs",
        sa.Column("id", sa.UUID(), primary_key=True),
        sa.Column("tenant_id", sa.UUID(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("status", JOB_STATUS, nullable=False),
        sa.Column("collection_id", sa.UUID(), sa.ForeignKey("collections.id", ondelete="SET NULL")),
        sa.Column("dataset", JSONB, nullable=False),
        sa.Column("config", JSONB, nullable=False),
        sa.Column("progress", JSONB, nullable=False),
        sa.Column("items_total", sa.Integer(), nullable=False),
        sa.Column("items_done", sa.Integer(), nullable=False),
        sa.Column("metrics", JSONB, nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True)),
        sa.Column("error", sa.Text()),
        *_timestamps(),
    )
    op.create_index("ix_eval_runs_tenant_created", "eval_runs", ["tenant_id", "created_at"])
    op.create_table(
        "eval_items",
        sa.Column("id", sa.UUID(), primary_key=True),
        sa.Column("run_id", sa.UUID(), sa.ForeignKey("eval_runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("tenant_id", sa.UUID(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False),
        sa.Column("variant", sa.String(200), nullable=False),
        sa.Column("item_key", sa.String(500), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("output", JSONB, nullable=False),
        sa.Column("metrics", JSONB, nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(100), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.UniqueConstraint("run_id", "variant", "item_key"),
    )
    op.create_table(
        "message_feedback",
        sa.Column("id", sa.UUID(), primary_key=True),
        sa.Column("tenant_id", sa.UUID(), sa.ForeignKey("tenants.id", ondelete="CASCADE"), nullable=False),
        sa.Column("message_id", sa.UUID(), sa.ForeignKey("messages.id", ondelete="CASCADE"), nullable=False),
        sa.Column("rating", sa.String(8), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("corrected_answer", sa.Text()),
        *_timestamps(),
    )
    op.create_index("ix_message_feedback_tenant_id", "message_feedback", ["tenant_id"])
    op.create_index("ix_message_feedback_message_id", "message_feedback", ["message_id"])


def downgrade() -> None:
    op.drop_table("message_feedback")
    op.drop_table("eval_items")
    op.drop_table("eval_runs")
