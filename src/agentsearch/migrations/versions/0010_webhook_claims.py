"""webhook claims: while an attempt of a delivery is out, until when it holds the delivery

Revision ID: 0010_webhook_claims
Revises: 0009_stage_timeouts
Create Date: 2026-11-26

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_webhook_claims"
down_revision: str | Sequence[str] | None = "0009_stage_timeouts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # NULL: no attempt out. Indexed only where set: the attempts in flight are few, the delivery log is long.
    with op.batch_alter_table("webhook_deliveries") as batch:
        batch.add_column(sa.Column("sending_until", sa.DateTime(timezone=True), nullable=True))
    op.create_index("ix_webhook_deliveries_sending_until", "webhook_deliveries", ["sending_until"],
                    postgresql_where=sa.text("sending_until IS NOT NULL"),
                    sqlite_where=sa.text("sending_until IS NOT NULL"))


def downgrade() -> None:
    op.drop_index("ix_webhook_deliveries_sending_until", table_name="webhook_deliveries")
    with op.batch_alter_table("webhook_deliveries") as batch:
        batch.drop_column("sending_until")
