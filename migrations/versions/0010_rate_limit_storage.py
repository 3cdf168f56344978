"""Counters of the Postgres rate-limit storage, used when no Redis is configured (api/limit_storage.py).

Revision ID: 0010_rate_limit_storage
Revises: 0009_isolate_runs
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_rate_limit_storage"
down_revision: str | Sequence[str] | None = "0009_isolate_runs"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rate_limit_counters",
        sa.Column("key", sa.String(length=300), primary_key=True),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        prefixes=["UNLOGGED"],
    )
    op.create_index("ix_rate_limit_counters_expires_at", "rate_limit_counters", ["expires_at"])
    op.create_table(
        "rate_limit_entries",
        sa.Column("id", sa.BigInteger(), primary_key=True, autoincrement=True),
        sa.Column("key", sa.String(length=300), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        prefixes=["UNLOGGED"],
    )
    op.create_index("ix_rate_limit_entries_key_at", "rate_limit_entries", ["key", "at"])


def downgrade() -> None:
    op.drop_table("rate_limit_entries")
    op.drop_table("rate_limit_counters")
