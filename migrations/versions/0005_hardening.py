"""Hardening: tenant_id on documents, chunks and jobs (backfilled), row-level security keyed on a
per-transaction setting, API key scopes and expiry.

Isolation in depth (see core/tenancy.py): the API runs every tenant transaction as the non-owner
role `groundwork_app` with `app.tenant_id` set locally; the policies below then hide every row of
another tenant, so a query that forgets its tenant filter returns nothing. The worker and the CLI
keep the owner's rights (the owner bypasses RLS) and work by ids handed to them.

Revision ID: 0005_hardening
Revises: 0004_conversations
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005_hardening"
down_revision: str | Sequence[str] | None = "0004_conversations"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

APP_ROLE = "groundwork_app"
BACKFILLED = ("documents", "chunks", "ingestion_jobs")
ISOLATED = ("collections", *BACKFILLED, "conversations")
ALL_SCOPES = '["admin", "write", "read"]'

# Rows written without a tenant_id (the worker, older code) take their collection's.
FILL_TENANT = """
CREATE FUNCTION groundwork_fill_tenant() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.tenant_id IS NULL THEN
        SELECT tenant_id INTO NEW.tenant_id FROM collections WHERE id = NEW.collection_id;
    END IF;
    RETURN NEW;
END $$;
"""

# NOTE: roles are cluster-wide (several databases share them), so create it only once.
CREATE_ROLE = f"""
DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
        CREATE ROLE {APP_ROLE} NOLOGIN;
    END IF;
END $$;
"""

TENANT_MATCHES = "tenant_id = NULLIF(current_setting('app.tenant_id', true), '')::uuid"


def upgrade() -> None:
    op.add_column(
        "api_keys",
        sa.Column(
            "scopes", postgresql.JSONB(), server_default=sa.text(f"'{ALL_SCOPES}'::jsonb"), nullable=False
        ),
    )
    op.add_column("api_keys", sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
    # Outbox flag: set once a job's messages are on the broker; existing jobs count as sent.
    op.add_column("ingestion_jobs", sa.Column("enqueued_at", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE ingestion_jobs SET enqueued_at = created_at")
    op.execute(FILL_TENANT)
    for table in BACKFILLED:
        op.add_column(table, sa.Column("tenant_id", sa.UUID(), nullable=True))
        op.execute(
            f"UPDATE {table} t SET tenant_id = c.tenant_id FROM collections c WHERE c.id = t.collection_id"
        )
        op.alter_column(table, "tenant_id", nullable=False)
        op.create_foreign_key(
            f"fk_{table}_tenant", table, "tenants", ["tenant_id"], ["id"], ondelete="CASCADE"
        )
        op.create_index(f"ix_{table}_tenant_id", table, ["tenant_id"])
        op.execute(
            f"CREATE TRIGGER groundwork_fill_tenant BEFORE INSERT ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION groundwork_fill_tenant()"
        )
    op.execute(CREATE_ROLE)
    # A migrating user that is not a superuser needs membership to SET ROLE to it (best effort: a
    # superuser, or a user without the right to grant, goes on without it).
    op.execute(
        f"DO $$ BEGIN EXECUTE format('GRANT {APP_ROLE} TO %I', current_user); "
        "EXCEPTION WHEN others THEN NULL; END $$"
    )
    op.execute(f"GRANT USAGE ON SCHEMA public TO {APP_ROLE}")
    op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {APP_ROLE}")
    op.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {APP_ROLE}")
    # Tables of later migrations (e.g. agent runs) are usable by the app role as well.
    op.execute(
        "ALTER DEFAULT PRIVILEGES IN SCHEMA public "
        f"GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO {APP_ROLE}"
    )
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
    op.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public REVOKE ALL ON TABLES FROM {APP_ROLE}")
    op.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {APP_ROLE}")
    op.execute(f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {APP_ROLE}")
    op.execute(f"REVOKE USAGE ON SCHEMA public FROM {APP_ROLE}")
    for table in BACKFILLED:
        op.execute(f"DROP TRIGGER IF EXISTS groundwork_fill_tenant ON {table}")
        op.drop_index(f"ix_{table}_tenant_id", table_name=table)
        op.drop_constraint(f"fk_{table}_tenant", table, type_="foreignkey")
        op.drop_column(table, "tenant_id")
    op.execute("DROP FUNCTION groundwork_fill_tenant()")
    op.drop_column("ingestion_jobs", "enqueued_at")
    op.drop_column("api_keys", "expires_at")
    op.drop_column("api_keys", "scopes")
