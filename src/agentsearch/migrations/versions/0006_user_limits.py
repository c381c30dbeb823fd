"""user_limits: an operator's rate limits and quotas for one user, over the defaults in the settings

Revision ID: 0006_user_limits
Revises: 0005_webhooks
Create Date: 2026-11-22

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_user_limits"
down_revision: str | Sequence[str] | None = "0005_webhooks"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A NULL column keeps the setting's default for that limit.
    op.create_table(
        "user_limits",
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("searches_per_minute", sa.Integer(), nullable=True),
        sa.Column("reads_per_minute", sa.Integer(), nullable=True),
        sa.Column("ingest_per_minute", sa.Integer(), nullable=True),
        sa.Column("max_running_jobs", sa.Integer(), nullable=True),
        sa.Column("max_documents", sa.Integer(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("user_id"),
    )


def downgrade() -> None:
    op.drop_table("user_limits")
