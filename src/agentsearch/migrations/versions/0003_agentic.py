"""agentic modes: seen content, profile sets and their runs, per-job loops

Revision ID: 0003_agentic
Revises: 0002_api_keys
Create Date: 2026-11-22

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003_agentic"
down_revision: str | Sequence[str] | None = "0002_api_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "seen_content",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("profile", sa.String(length=64), nullable=False),
        sa.Column("collection_id", sa.String(length=64), nullable=False),
        sa.Column("item_id", sa.String(length=512), nullable=False),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("embedding", JSON, nullable=True),
        sa.Column("source", sa.String(length=255), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=True),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("seen_content", schema=None) as batch_op:
        batch_op.create_index("ix_seen_content_user_seen_at", ["user_id", "seen_at"], unique=False)

    op.create_table(
        "profile_sets",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("collection_id", sa.Uuid(), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("profiles", JSON, nullable=False),
        sa.Column("options", JSON, nullable=False),
        sa.Column("schedule_s", sa.Float(), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("next_run_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_run_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["collection_id"], ["collections.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("user_id", "name", name="uq_profile_sets_user_name"),
    )
    with op.batch_alter_table("profile_sets", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_profile_sets_user_id"), ["user_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_profile_sets_next_run_at"), ["next_run_at"], unique=False)

    op.create_table(
        "profile_runs",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("profile_set_id", sa.Uuid(), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("trigger", sa.String(length=20), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["profile_set_id"], ["profile_sets.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("job_id"),
    )
    with op.batch_alter_table("profile_runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_profile_runs_profile_set_id"), ["profile_set_id"], unique=False)

    op.create_table(
        "agentic_loops",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("profile", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("iteration", sa.Integer(), nullable=False),
        sa.Column("state", JSON, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("job_id", "profile", name="uq_agentic_loops_job_profile"),
    )
    with op.batch_alter_table("agentic_loops", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_agentic_loops_job_id"), ["job_id"], unique=False)


def downgrade() -> None:
    op.drop_table("agentic_loops")
    op.drop_table("profile_runs")
    op.drop_table("profile_sets")
    op.drop_table("seen_content")
