"""Jobs, the truth about each, and the artifacts their agents wrote.

Every table is on ``agentsearch.pipeline.platform.db.Base``'s metadata, which Alembic compares its migrations with."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    Uuid,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from agentsearch.pipeline.platform.db import Base, JSONType, utcnow


class JobRow(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        Index("ix_jobs_user_status", "user_id", "status"),
        Index("ix_jobs_cache_key", "cache_key"),
        Index("ix_jobs_status_deadline", "status", "deadline_at"),
        # Retention (agentsearch.pipeline.operations.retention): the oldest finished jobs, and whether a cached copy
        # names one.
        Index("ix_jobs_finished_at", "finished_at"),
        Index("ix_jobs_cached_from", "cached_from", postgresql_where=text("cached_from IS NOT NULL"),
              sqlite_where=text("cached_from IS NOT NULL")),
        UniqueConstraint("user_id", "idempotency_key", name="uq_jobs_user_idempotency_key"),
    )
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    collection_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"), index=True)
    query: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(20), default="queued")  # queued|running|succeeded|failed
    stage: Mapped[str | None] = mapped_column(String(50))
    # Every stage the job entered, in order, with when: what the event stream replays.
    stage_log: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, default=list)
    request: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    config_snapshot: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, default=list)
    state: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    agent_runs: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, default=list)
    timings_ms: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    response: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    error: Mapped[str | None] = mapped_column(Text)
    deadline_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    idempotency_key: Mapped[str | None] = mapped_column(String(255))
    # Digest of everything that decides the response (query, options, agent configs, collection epochs).
    cache_key: Mapped[str | None] = mapped_column(String(64))
    cached_from: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    # The document groups its searches were restricted to (agentsearch.pipeline.security.document_access); None: it
    # searched personal collections only, where no document has groups.
    # Stored as SQL NULL (not JSON null) when None, so a listing can ask for it in SQL (groups_within).
    access_groups: Mapped[list[str] | None] = mapped_column(
        JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql"), nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    # The Celery node that last reported progress: the reaper retries the job when that node stops heartbeating.
    worker: Mapped[str | None] = mapped_column(String(255))
    # What the job was enqueued with, so the reaper can enqueue it again; and its task ids, so cancel can revoke.
    initial_state: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    task_ids: Mapped[list[str] | None] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class ArtifactRow(Base):
    __tablename__ = "artifacts"
    # One artifact per (job, filename): a task that runs twice overwrites instead of adding a second copy,
    # and the download URL names exactly one artifact.
    __table_args__ = (UniqueConstraint("job_id", "filename", name="uq_artifacts_job_filename"),)
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    agent_id: Mapped[str] = mapped_column(String(100))
    type: Mapped[str] = mapped_column(String(20))
    filename: Mapped[str] = mapped_column(String(255))
    content_type: Mapped[str] = mapped_column(String(100))
    size: Mapped[int] = mapped_column(Integer)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONType, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
