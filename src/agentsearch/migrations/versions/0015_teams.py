"""teams: teams of users with a role each (admin, editor, viewer), collections a team shares, webhooks of a collection

Revision ID: 0015_teams
Revises: 0014_key_scopes
Create Date: 2026-11-27

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_teams"
down_revision: str | Sequence[str] | None = "0014_key_scopes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PERSONAL = sa.text("team_id IS NULL")
SHARED = sa.text("team_id IS NOT NULL")


def upgrade() -> None:
    op.create_table(
        "teams",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("created_by", sa.Uuid(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["created_by"], ["users.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name", name="uq_teams_name"),
    )
    op.create_table(
        "team_members",
        sa.Column("team_id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["team_id"], ["teams.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("team_id", "user_id"),
    )
    op.create_index("ix_team_members_user_id", "team_members", ["user_id"])
    # A personal collection's name is unique among its user's (as before), a team collection's among its team's:
    # a member may have a personal "handbook" beside the team's.
    with op.batch_alter_table("collections", schema=None) as batch_op:
        batch_op.add_column(sa.Column("team_id", sa.Uuid(), nullable=True))
        batch_op.create_foreign_key("fk_collections_team_id", "teams", ["team_id"], ["id"])
        batch_op.drop_constraint("uq_collections_user_name", type_="unique")
    op.create_index("ix_collections_team_id", "collections", ["team_id"])
    op.create_index("ux_collections_personal_name", "collections", ["user_id", "name"], unique=True,
                    postgresql_where=PERSONAL, sqlite_where=PERSONAL)
    op.create_index("ux_collections_team_name", "collections", ["team_id", "name"], unique=True,
                    postgresql_where=SHARED, sqlite_where=SHARED)
    # NULL: a webhook of its user's jobs, as before; a collection: of every job over it, whoever ran it.
    with op.batch_alter_table("webhooks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("collection_id", sa.Uuid(), nullable=True))
        batch_op.create_foreign_key("fk_webhooks_collection_id", "collections", ["collection_id"], ["id"],
                                    ondelete="CASCADE")
    op.create_index("ix_webhooks_collection_id", "webhooks", ["collection_id"])


def downgrade() -> None:
    op.drop_index("ix_webhooks_collection_id", table_name="webhooks")
    with op.batch_alter_table("webhooks", schema=None) as batch_op:
        batch_op.drop_constraint("fk_webhooks_collection_id", type_="foreignkey")
        batch_op.drop_column("collection_id")
    # A team collection goes back to the member who made it; its name must then be unique among that user's.
    op.drop_index("ux_collections_team_name", table_name="collections")
    op.drop_index("ux_collections_personal_name", table_name="collections")
    op.drop_index("ix_collections_team_id", table_name="collections")
    with op.batch_alter_table("collections", schema=None) as batch_op:
        batch_op.drop_constraint("fk_collections_team_id", type_="foreignkey")
        batch_op.drop_column("team_id")
        batch_op.create_unique_constraint("uq_collections_user_name", ["user_id", "name"])
    op.drop_index("ix_team_members_user_id", table_name="team_members")
    op.drop_table("team_members")
    op.drop_table("teams")
