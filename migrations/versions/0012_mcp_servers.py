"""The MCP servers an agent run may use (agents/mcp/).

Revision ID: 0012_mcp_servers
Revises: 0011_connectors
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0012_mcp_servers"
down_revision: str | Sequence[str] | None = "0011_connectors"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "agent_runs",
        sa.Column("mcp_servers", postgresql.JSONB(), nullable=False, server_default=sa.text("'[]'::jsonb")),
    )


def downgrade() -> None:
    op.drop_column("agent_runs", "mcp_servers")
