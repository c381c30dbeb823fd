"""audit: audit_events, append-only for the service (a trigger refuses UPDATE, and DELETE but the pruner's)

Revision ID: 0017_audit
Revises: 0016_sso_sessions
Create Date: 2026-11-27

The service connects as the owner of its tables, so a REVOKE would not hold against it: a trigger does. On
PostgreSQL every UPDATE and every DELETE of a row raises, but a DELETE in a transaction that set
``agentsearch.audit_prune`` (``SET LOCAL``, only ``agentsearch.pipeline.operations.retention`` does). On SQLite
(embedded, a file of the local user's) an UPDATE raises; a DELETE is left to the pruner, as SQLite has no session
setting.
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0017_audit"
down_revision: str | Sequence[str] | None = "0016_sso_sessions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PG_FUNCTION = """
CREATE FUNCTION audit_events_append_only() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('agentsearch.audit_prune', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit_events is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$ LANGUAGE plpgsql
"""
PG_TRIGGER = ("CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events "
              "FOR EACH ROW EXECUTE FUNCTION audit_events_append_only()")
SQLITE_TRIGGER = ("CREATE TRIGGER audit_events_append_only BEFORE UPDATE ON audit_events "
                  "BEGIN SELECT RAISE(ABORT, 'audit_events is append-only: UPDATE refused'); END")


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    op.create_table(
        "audit_events",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor_id", sa.Uuid(), nullable=True),
        sa.Column("key_prefix", sa.String(length=16), nullable=False),
        sa.Column("team_id", sa.Uuid(), nullable=True),
        sa.Column("collection_id", sa.Uuid(), nullable=True),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("target_type", sa.String(length=32), nullable=False),
        sa.Column("target_id", sa.String(length=512), nullable=False),
        sa.Column("details", json_type, nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=True),
        sa.Column("ip", sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_audit_events_team_id", "audit_events", ["team_id", "id"])
    op.create_index("ix_audit_events_at", "audit_events", ["at"])
    op.create_index("ix_audit_events_actor_id", "audit_events", ["actor_id"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(PG_FUNCTION)
        op.execute(PG_TRIGGER)
    else:
        op.execute(SQLITE_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER audit_events_append_only ON audit_events")
        op.execute("DROP FUNCTION audit_events_append_only()")
    else:
        op.execute("DROP TRIGGER audit_events_append_only")
    op.drop_index("ix_audit_events_actor_id", table_name="audit_events")
    op.drop_index("ix_audit_events_at", table_name="audit_events")
    op.drop_index("ix_audit_events_team_id", table_name="audit_events")
    op.drop_table("audit_events")
