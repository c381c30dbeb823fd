"""stage timeouts: a collection's per-stage budgets for its jobs

Revision ID: 0009_stage_timeouts
Revises: 0008_fallback_agents
Create Date: 2026-11-25

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0009_stage_timeouts"
down_revision: str | Sequence[str] | None = "0008_fallback_agents"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # NULL: no stage budgets, the jobs run as before (only the job deadline bounds them).
    with op.batch_alter_table("collections") as batch:
        json_type = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")
        batch.add_column(sa.Column("stage_timeouts", json_type, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("collections") as batch:
        batch.drop_column("stage_timeouts")
