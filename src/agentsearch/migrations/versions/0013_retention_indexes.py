"""retention indexes: the oldest finished jobs, deliveries and turns first, and the cached copies naming a job

Revision ID: 0013_retention_indexes
Revises: 0012_document_ingestion
Create Date: 2026-11-27

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_retention_indexes"
down_revision: str | Sequence[str] | None = "0012_document_ingestion"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COPIES = sa.text("cached_from IS NOT NULL")
# (index, table, columns): what src/agentsearch/pipeline/operations/retention.py selects by, oldest first, in small
# batches.
BY_AGE = (
    ("ix_jobs_finished_at", "jobs", ["finished_at"]),
    ("ix_webhook_deliveries_created_at", "webhook_deliveries", ["created_at"]),
    ("ix_conversation_turns_created_at", "conversation_turns", ["created_at"]),
)


def upgrade() -> None:
    for name, table, columns in BY_AGE:
        op.create_index(name, table, columns)
    # Only the few jobs answered from cache name another job: a partial index stays small.
    op.create_index("ix_jobs_cached_from", "jobs", ["cached_from"], postgresql_where=COPIES, sqlite_where=COPIES)


def downgrade() -> None:
    op.drop_index("ix_jobs_cached_from", table_name="jobs")
    for name, table, _columns in reversed(BY_AGE):
        op.drop_index(name, table_name=table)
