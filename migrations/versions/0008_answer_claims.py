"""Assistant messages keep how the answer was made and its per-sentence claim check.

Revision ID: 0008_answer_claims
Revises: 0007
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008_answer_claims"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("answer_mode", sa.String(length=16), nullable=True))
    op.add_column("messages", sa.Column("claims", postgresql.JSONB(astext_type=sa.Text()), nullable=True))


def downgrade() -> None:
    op.drop_column("messages", "claims")
    op.drop_column("messages", "answer_mode")
