"""Collections and their documents: the documents' groups, and the files waiting to be parsed.

Every table is on ``agentsearch.pipeline.platform.db.Base``'s metadata, which Alembic compares its migrations with."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    DateTime,
    Float,
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
from sqlalchemy.orm import Mapped, mapped_column

from agentsearch.pipeline.platform.db import Base, JSONType, utcnow


def milvus_collection_name(collection_id: str | uuid.UUID) -> str:
    """The Milvus collection holding an agentsearch collection's chunks (Milvus names allow no dashes)."""
    return f"c_{uuid.UUID(str(collection_id)).hex}"


class CollectionRow(Base):
    __tablename__ = "collections"
    # A personal collection's name is unique among its user's, a team collection's among its team's.
    __table_args__ = (
        Index("ux_collections_personal_name", "user_id", "name", unique=True,
              postgresql_where=text("team_id IS NULL"), sqlite_where=text("team_id IS NULL")),
        Index("ux_collections_team_name", "team_id", "name", unique=True,
              postgresql_where=text("team_id IS NOT NULL"), sqlite_where=text("team_id IS NOT NULL")),
    )
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    # Who made it: its owner when personal; for a team collection, whose document quota it counts against.
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # Set: the team's collection, reached by its members by their role (``agentsearch.pipeline.security.access``).
    team_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("teams.id"), index=True, nullable=True)
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str | None] = mapped_column(Text)
    embedding_model: Mapped[str] = mapped_column(String(255))
    # Bumped by every change to the indexed content: part of every retrieval cache key.
    index_epoch: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # Seconds per stage ({pre_search, post_search, response}, each optional) for its jobs:
    # agentsearch.pipeline.job.stage_budget.
    stage_timeouts: Mapped[dict[str, float] | None] = mapped_column(JSONType, nullable=True)
    # Its jobs' search settings (strategy, fusion, top_k, ...; a request's own win): agentsearch.pipeline.eval.gate.
    search_settings: Mapped[dict[str, Any] | None] = mapped_column(JSONType, nullable=True)
    # How far a figure of its question set may fall before a staged change is refused (an admin's; NULL: the
    # service's default, AGENTSEARCH_QUALITY_TOLERANCE).
    quality_tolerance: Mapped[float | None] = mapped_column(Float, nullable=True)

    @property
    def milvus_name(self) -> str:
        return milvus_collection_name(self.id)


class DocumentRow(Base):
    __tablename__ = "documents"
    __table_args__ = (
        UniqueConstraint("collection_id", "external_id", name="uq_documents_collection_external"),
        # A collection's ingestion progress (agentsearch.pipeline.ingestion.progress) and the reaper's look for lost
        # documents.
        Index("ix_documents_collection_queued", "collection_id", "queued_at"),
        Index("ix_documents_collection_finished", "collection_id", "finished_at"),
        Index("ix_documents_pending", "collection_id", "queued_at", postgresql_where=text("status = 'pending'"),
              sqlite_where=text("status = 'pending'")),
    )
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    collection_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"), index=True)
    external_id: Mapped[str] = mapped_column(String(512))
    title: Mapped[str] = mapped_column(Text, default="")
    text: Mapped[str] = mapped_column(Text)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONType, default=dict)
    status: Mapped[str] = mapped_column(String(20), default="pending")  # pending | indexed | failed
    error: Mapped[str | None] = mapped_column(Text)
    # A document read from a file: where each part of ``text`` stands in it ({"start", "end", "location"}), what
    # the reading noted, the SHA-256 of the file's bytes (folder sync compares it), and pages read so far of all.
    parts: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONType)
    notes: Mapped[list[str] | None] = mapped_column(JSONType)
    content_hash: Mapped[str | None] = mapped_column(String(64))
    # The content digest of its indexed chunks (``agentsearch.pipeline.ingestion.indexing.content_digest``), written
    # as it is indexed: what an answer citing it compares its version with (``agentsearch.pipeline.ingestion.cited``).
    version: Mapped[str | None] = mapped_column(String(64))
    pages_done: Mapped[int | None] = mapped_column(Integer)
    pages_total: Mapped[int | None] = mapped_column(Integer)
    # Its ingestion (agentsearch.pipeline.ingestion.lease): when it was queued and when it ended, the chunks it was
    # indexed as; the task that carries it now (a parsing window or the indexing), the node that started that task (and
    # Celery's retry count then), and how many workers or tasks it lost on the way.
    queued_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    chunks: Mapped[int | None] = mapped_column(Integer)
    task_id: Mapped[str | None] = mapped_column(String(64))
    worker: Mapped[str | None] = mapped_column(String(255))
    task_retries: Mapped[int | None] = mapped_column(Integer)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class DocumentGroupRow(Base):
    """One group a team collection's document is restricted to: with any, only those groups' members find it
    (``agentsearch.pipeline.security.document_access``); with none, every member of the collection does."""

    __tablename__ = "document_groups"
    document_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(String(100), primary_key=True)


class DocumentFileRow(Base):
    """An uploaded file waiting to be parsed by a worker (``agentsearch.worker.parsing``), gone once its document is
    read. ``parsed`` is its reading state: who sent it and what its attachments may still become
    (``agentsearch.pipeline.ingestion.attachments``), and the parts of the pages read so far, when a long file is read a
    window of pages at a time."""

    __tablename__ = "document_files"
    document_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    format: Mapped[str] = mapped_column(String(20))
    data: Mapped[bytes] = mapped_column(LargeBinary)
    parsed: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
