"""The agentic mode: what a user was shown, the profile sets and their runs, a job's iterative loops.

Every table is on ``agentsearch.pipeline.platform.db.Base``'s metadata, which Alembic compares its migrations with."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, DateTime, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from agentsearch.pipeline.platform.db import Base, JSONType, utcnow


class SeenContentRow(Base):
    """What an agentic run returned to a user: later runs skip it for a while
    (``agentsearch.pipeline.agentic.seen``)."""

    __tablename__ = "seen_content"
    __table_args__ = (Index("ix_seen_content_user_seen_at", "user_id", "seen_at"),)
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    profile: Mapped[str] = mapped_column(String(64), default="")
    # Plain values, no foreign keys: what was shown stays shown after its collection or job is deleted.
    collection_id: Mapped[str] = mapped_column(String(64), default="")
    item_id: Mapped[str] = mapped_column(String(512))
    url: Mapped[str | None] = mapped_column(Text)
    title: Mapped[str] = mapped_column(Text, default="")
    embedding: Mapped[list[float] | None] = mapped_column(JSONType)
    source: Mapped[str] = mapped_column(String(255))
    job_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    seen_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ProfileSetRow(Base):
    """A user's specialist profiles with the query and collection they run on, optionally on a schedule."""

    __tablename__ = "profile_sets"
    __table_args__ = (UniqueConstraint("user_id", "name", name="uq_profile_sets_user_name"),)
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(255))
    collection_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"))
    query: Mapped[str] = mapped_column(Text, default="")
    profiles: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, default=list)
    options: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    schedule_s: Mapped[float | None] = mapped_column(Float)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    next_run_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), index=True)
    last_run_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class ProfileRunRow(Base):
    """One run of a profile set: the job that ran it, and whether a person or the schedule started it."""

    __tablename__ = "profile_runs"
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    profile_set_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("profile_sets.id", ondelete="CASCADE"), index=True)
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), unique=True)
    trigger: Mapped[str] = mapped_column(String(20), default="manual")  # manual | schedule
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AgenticLoopRow(Base):
    """One iterative loop of a job (one per profile): its latest state, so the last loop to end can merge them all."""

    __tablename__ = "agentic_loops"
    __table_args__ = (UniqueConstraint("job_id", "profile", name="uq_agentic_loops_job_profile"),)
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    profile: Mapped[str] = mapped_column(String(64), default="")
    status: Mapped[str] = mapped_column(String(20), default="running")  # running | done
    iteration: Mapped[int] = mapped_column(Integer, default=0)
    state: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)
