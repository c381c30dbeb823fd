"""document ingestion: when each document was queued and ended, its chunks, the task and worker holding it, the
workers it lost

Revision ID: 0012_document_ingestion
Revises: 0011_document_files
Create Date: 2026-11-27

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_document_ingestion"
down_revision: str | Sequence[str] | None = "0011_document_files"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PENDING = sa.text("status = 'pending'")


def upgrade() -> None:
    # Nullable but attempts: a document indexed before this has no times nor chunks, and holds no task.
    with op.batch_alter_table("documents") as batch:
        batch.add_column(sa.Column("queued_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("chunks", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("task_id", sa.String(64), nullable=True))
        batch.add_column(sa.Column("worker", sa.String(255), nullable=True))
        batch.add_column(sa.Column("task_retries", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"))
    # A document pending at the upgrade counts in its collection's progress from its last change; the reaper finds
    # it too, should its task have been lost.
    op.execute("UPDATE documents SET queued_at = updated_at WHERE status = 'pending'")
    op.create_index("ix_documents_collection_queued", "documents", ["collection_id", "queued_at"])
    op.create_index("ix_documents_collection_finished", "documents", ["collection_id", "finished_at"])
    op.create_index("ix_documents_pending", "documents", ["collection_id", "queued_at"], postgresql_where=PENDING,
                    sqlite_where=PENDING)


def downgrade() -> None:
    for index in ("ix_documents_pending", "ix_documents_collection_finished", "ix_documents_collection_queued"):
        op.drop_index(index, table_name="documents")
    with op.batch_alter_table("documents") as batch:
        for column in ("attempts", "task_retries", "worker", "task_id", "chunks", "finished_at", "queued_at"):
            batch.drop_column(column)
