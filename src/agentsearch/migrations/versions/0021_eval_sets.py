"""eval sets: a collection's question set made from its documents, the runs measured on it, its search settings and
the tolerance its staged changes are held to

Revision ID: 0021_eval_sets
Revises: 0020_answer_trust
Create Date: 2026-11-29

``eval_sets`` holds how a collection's set was made, ``eval_questions`` its questions with the document, version and
answer span each was made from (``agentsearch.pipeline.eval.eval_sets``); ``eval_runs`` every measurement on it
(``agentsearch.pipeline.eval.quality_runs``). ``collections.search_settings`` are its jobs' search settings and
``collections.quality_tolerance`` how far a figure may fall under a staged change (``agentsearch.pipeline.eval.gate``).
"""
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0021_eval_sets"
down_revision: str | Sequence[str] | None = "0020_answer_trust"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "eval_sets",
        sa.Column("collection_id", sa.Uuid(), nullable=False),
        sa.Column("method", sa.String(length=20), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("refreshed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["collection_id"], ["collections.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("collection_id"),
    )
    op.create_table(
        "eval_questions",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("collection_id", sa.Uuid(), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("document_id", sa.String(length=512), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=True),
        sa.Column("start", sa.Integer(), nullable=True),
        sa.Column("end", sa.Integer(), nullable=True),
        sa.Column("origin", sa.String(length=10), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["collection_id"], ["eval_sets.collection_id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_eval_questions_collection", "eval_questions", ["collection_id", "created_at"])
    op.create_table(
        "eval_runs",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("collection_id", sa.Uuid(), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("status", sa.String(length=10), nullable=False),
        sa.Column("settings", JSON, nullable=False),
        sa.Column("figures", JSON, nullable=False),
        sa.Column("questions", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["collection_id"], ["collections.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_eval_runs_collection", "eval_runs", ["collection_id", "created_at"])
    with op.batch_alter_table("collections", schema=None) as batch_op:
        batch_op.add_column(sa.Column("search_settings", JSON, nullable=True))
        batch_op.add_column(sa.Column("quality_tolerance", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("collections", schema=None) as batch_op:
        batch_op.drop_column("quality_tolerance")
        batch_op.drop_column("search_settings")
    op.drop_index("ix_eval_runs_collection", table_name="eval_runs")
    op.drop_table("eval_runs")
    op.drop_index("ix_eval_questions_collection", table_name="eval_questions")
    op.drop_table("eval_questions")
    op.drop_table("eval_sets")
