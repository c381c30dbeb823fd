"""key scopes: what an API key may do (scopes), which collections it sees, and when it expires

Revision ID: 0014_key_scopes
Revises: 0013_retention_indexes
Create Date: 2026-11-27

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0014_key_scopes"
down_revision: str | Sequence[str] | None = "0013_retention_indexes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    # NULL is no limit: every key issued before keeps doing all its user may.
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.add_column(sa.Column("scopes", json_type, nullable=True))
        batch_op.add_column(sa.Column("collections", json_type, nullable=True))
        batch_op.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_column("expires_at")
        batch_op.drop_column("collections")
        batch_op.drop_column("scopes")
