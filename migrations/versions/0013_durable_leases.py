"""Leases on agent runs and evaluation runs (core/durable.py): who holds a run and since when.

Revision ID: 0013_durable_leases
Revises: 0012_mcp_servers
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_durable_leases"
down_revision: str | Sequence[str] | None = "0012_mcp_servers"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("agent_runs", sa.Column("claimed_by", sa.String(64), nullable=True))
    op.add_column("agent_runs", sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("agent_runs", sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"))
    op.add_column("eval_runs", sa.Column("claimed_by", sa.String(64), nullable=True))


def downgrade() -> None:
    op.drop_column("eval_runs", "claimed_by")
    for column in ("attempts", "heartbeat_at", "claimed_by"):
        op.drop_column("agent_runs", column)
