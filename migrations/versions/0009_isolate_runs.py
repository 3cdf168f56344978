"""Row-level security on the tables added after hardening: agent runs, evaluation runs and items, and
answer feedback are hidden from the app role unless `app.tenant_id` names their tenant (see 0005).

Revision ID: 0009_isolate_runs
Revises: 0008_answer_claims
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0009_isolate_runs"
down_revision: str | Sequence[str] | None = "0008_answer_claims"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ISOLATED = ("agent_runs", "eval_runs", "eval_items", "message_feedback")
TENANT_MATCHES = "tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::uuid"


def upgrade() -> None:
    for table in ISOLATED:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            f"USING ({TENANT_MATCHES}) WITH CHECK ({TENANT_MATCHES})"
        )


def downgrade() -> None:
    for table in ISOLATED:
        op.execute(f"DROP POLICY IF EXISTS tenant_isolation ON {table}")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
