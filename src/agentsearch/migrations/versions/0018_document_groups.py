"""document groups: a team's groups of members, the groups a document is restricted to, the groups a job searched with

Revision ID: 0018_document_groups
Revises: 0017_audit
Create Date: 2026-11-28

A document with no row in ``document_groups`` is found by every member of its collection, as before; one with rows
only by members of one of those groups (``team_groups``). A job records the groups it searched with, so a member
reads another's job only when it holds them all (``agentsearch.pipeline.security.document_access``).
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0018_document_groups"
down_revision: str | Sequence[str] | None = "0017_audit"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
    op.create_table(
        "team_groups",
        sa.Column("team_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["team_id"], ["teams.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("team_id", "name", "user_id"),
    )
    op.create_index("ix_team_groups_user_id", "team_groups", ["user_id"])
    op.create_table(
        "document_groups",
        sa.Column("document_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.ForeignKeyConstraint(["document_id"], ["documents.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("document_id", "name"),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("access_groups", json_type, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("access_groups")
    op.drop_table("document_groups")
    op.drop_index("ix_team_groups_user_id", table_name="team_groups")
    op.drop_table("team_groups")
