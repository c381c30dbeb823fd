"""answer trust: the document versions an answer cites and their stale marks, a document's indexed version, feedback

Revision ID: 0020_answer_trust
Revises: 0019_sources
Create Date: 2026-11-29

``job_citations`` holds one row per document a job's answer cites, at the version it read; a change or deletion of
the document marks the row ``stale`` in the same transaction (``agentsearch.pipeline.ingestion.cited``).
``documents.version`` is the content digest the document was last indexed at. ``job_feedback`` holds a user's thumbs
up or down on an answer or one of its sources (``agentsearch.pipeline.job.feedback``).
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020_answer_trust"
down_revision: str | Sequence[str] | None = "0019_sources"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_citations",
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("collection_id", sa.Uuid(), nullable=False),
        sa.Column("document_id", sa.String(length=512), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=True),
        sa.Column("stale", sa.String(length=10), nullable=True),
        sa.Column("stale_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("announced_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "collection_id", "document_id"),
    )
    op.create_index("ix_job_citations_document", "job_citations", ["collection_id", "document_id"])
    op.create_index("ix_job_citations_unannounced", "job_citations", ["stale_at"],
                    postgresql_where=sa.text("stale IS NOT NULL AND announced_at IS NULL"),
                    sqlite_where=sa.text("stale IS NOT NULL AND announced_at IS NULL"))
    op.create_table(
        "job_feedback",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("collection_id", sa.Uuid(), nullable=False),
        sa.Column("user_id", sa.Uuid(), nullable=False),
        sa.Column("rating", sa.String(length=4), nullable=False),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("source", sa.String(length=512), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["collection_id"], ["collections.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("job_id", "user_id", "source", name="uq_job_feedback_job_user_source"),
    )
    op.create_index("ix_job_feedback_collection_created", "job_feedback", ["collection_id", "created_at"])
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("version", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("documents", schema=None) as batch_op:
        batch_op.drop_column("version")
    op.drop_index("ix_job_feedback_collection_created", table_name="job_feedback")
    op.drop_table("job_feedback")
    op.drop_index("ix_job_citations_unannounced", table_name="job_citations")
    op.drop_index("ix_job_citations_document", table_name="job_citations")
    op.drop_table("job_citations")
