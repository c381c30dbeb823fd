"""document files: uploaded files parsed by workers, each document's parts, notes, content hash and page progress

Revision ID: 0011_document_files
Revises: 0010_webhook_claims
Create Date: 2026-11-27

"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011_document_files"
down_revision: str | Sequence[str] | None = "0010_webhook_claims"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    # All nullable: a document sent as text has no parts, and its rows from before stay as they are.
    with op.batch_alter_table("documents") as batch:
        batch.add_column(sa.Column("parts", JSON, nullable=True))
        batch.add_column(sa.Column("notes", JSON, nullable=True))
        batch.add_column(sa.Column("content_hash", sa.String(64), nullable=True))
        batch.add_column(sa.Column("pages_done", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("pages_total", sa.Integer(), nullable=True))
    op.create_table(
        "document_files",
        sa.Column("document_id", sa.Uuid(), sa.ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("format", sa.String(20), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("parsed", JSON, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("document_files")
    with op.batch_alter_table("documents") as batch:
        for column in ("pages_total", "pages_done", "content_hash", "notes", "parts"):
            batch.drop_column(column)
