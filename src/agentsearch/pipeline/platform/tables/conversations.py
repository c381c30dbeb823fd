"""Conversations: the questions asked in one follow one another, a turn per finished job.

Every table is on ``agentsearch.pipeline.platform.db.Base``'s metadata, which Alembic compares its migrations with."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Index, String, Text, UniqueConstraint, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from agentsearch.pipeline.platform.db import Base, utcnow


class ConversationRow(Base):
    """A user's conversation: the questions asked in it follow one another
    (``agentsearch.pipeline.job.conversation``)."""

    __tablename__ = "conversations"
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    title: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class ConversationTurnRow(Base):
    """One finished job of a conversation: the question as asked, the standalone query it was searched as, and
    the answer. Written in the transaction that ends the job; one per job."""

    __tablename__ = "conversation_turns"
    __table_args__ = (
        Index("ix_conversation_turns_conversation_created", "conversation_id", "created_at"),
        Index("ix_conversation_turns_created_at", "created_at"),  # retention: the oldest first
        UniqueConstraint("job_id", name="uq_conversation_turns_job_id"),
    )
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    conversation_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("conversations.id", ondelete="CASCADE"))
    # A plain value, no foreign key: the jobs stay when a conversation is forgotten, and the turn outlives its job.
    job_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    status: Mapped[str] = mapped_column(String(20))
    question: Mapped[str] = mapped_column(Text)
    standalone_query: Mapped[str] = mapped_column(Text)
    answer: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
