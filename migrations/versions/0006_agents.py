"""Agent runs: status, trace, plan, pending client tool calls, answer and usage per run.

LangGraph's checkpoint tables are created by its own saver (`AsyncPostgresSaver.setup`), which
versions them itself; see agents/README.md.

Revision ID: 0006_agents
Revises: 0004_conversations
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006_agents"
down_revision: str | Sequence[str] | None = "0005_hardening"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _jsonb(name: str) -> sa.Column:
    return sa.Column(name, postgresql.JSONB(astext_type=sa.Text()), nullable=False)


def upgrade() -> None:
    op.create_table(
        "agent_runs",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("agent", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("input", sa.Text(), nullable=False),
        _jsonb("collection_ids"),
        _jsonb("tools"),
        _jsonb("client_tools"),
        _jsonb("budgets"),
        sa.Column("review_plan", sa.Boolean(), nullable=False),
        _jsonb("plan"),
        _jsonb("trace"),
        _jsonb("required_action"),
        sa.Column("answer", sa.Text(), nullable=True),
        _jsonb("citations"),
        _jsonb("usage"),
        sa.Column("finish_reason", sa.String(length=32), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("active_s", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_agent_runs_tenant_created", "agent_runs", ["tenant_id", "created_at"])
    op.create_index("ix_agent_runs_status", "agent_runs", ["status"])


def downgrade() -> None:
    op.drop_index("ix_agent_runs_status", table_name="agent_runs")
    op.drop_index("ix_agent_runs_tenant_created", table_name="agent_runs")
    op.drop_table("agent_runs")
