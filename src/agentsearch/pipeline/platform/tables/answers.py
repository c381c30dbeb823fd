"""What stands behind a finished answer: the version of each document it cites (and whether that document has changed
or gone since), and what the people who asked thought of it.

Every table is on ``agentsearch.pipeline.platform.db.Base``'s metadata, which Alembic compares its migrations with."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Index, String, Text, UniqueConstraint, Uuid, text
from sqlalchemy.orm import Mapped, mapped_column

from agentsearch.pipeline.platform.db import Base, utcnow


class JobCitationRow(Base):
    """One document a job's answer cites, at the version it read (``agentsearch.pipeline.ingestion.cited``).

    ``stale`` is set when the document changes (``changed``: indexed again with another content digest) or is
    deleted (``deleted``), in the transaction that changes it; ``announced_at`` once the job's ``job.stale`` webhook
    deliveries are written (``agentsearch.pipeline.webhooks.stale``). A job answered from the cache has no rows of
    its own: it reads those of the job it copies (``cached_from``)."""

    __tablename__ = "job_citations"
    __table_args__ = (
        # A document's change finds the answers citing it.
        Index("ix_job_citations_document", "collection_id", "document_id"),
        # The sweep finds the stale marks not yet announced.
        Index("ix_job_citations_unannounced", "stale_at",
              postgresql_where=text("stale IS NOT NULL AND announced_at IS NULL"),
              sqlite_where=text("stale IS NOT NULL AND announced_at IS NULL")),
    )
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    collection_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    document_id: Mapped[str] = mapped_column(String(512), primary_key=True)
    # The content digest of the chunks the answer read (``agentsearch.pipeline.ingestion.indexing.content_digest``).
    version: Mapped[str | None] = mapped_column(String(64))
    stale: Mapped[str | None] = mapped_column(String(10))  # None | changed | deleted
    stale_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    announced_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class FeedbackRow(Base):
    """A thumbs up or down on a job's answer (``source`` empty) or on one of its sources (``source``: its document
    id), by one user: a second rating of the same thing by the same user replaces the first
    (``agentsearch.pipeline.job.feedback``)."""

    __tablename__ = "job_feedback"
    __table_args__ = (
        UniqueConstraint("job_id", "user_id", "source", name="uq_job_feedback_job_user_source"),
        # An admin's weekly view of a collection's feedback.
        Index("ix_job_feedback_collection_created", "collection_id", "created_at"),
    )
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    collection_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"))
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    rating: Mapped[str] = mapped_column(String(4))  # up | down
    comment: Mapped[str | None] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(512), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)
