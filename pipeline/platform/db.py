"""Persistence: SQLAlchemy 2 models for PostgreSQL (JSONB) and SQLite, and the session factory.

The schema changes only through Alembic (``migrations/``). The ``jobs`` table is the truth about a job.

Usage::

    db = Database(settings.database_url)
    with db.session() as s:
        s.add(Collection(name="docs", user_id=DEFAULT_USER_ID, ...))
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Engine,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    Uuid,
    create_engine,
    event,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

# The local user: owns what the CLI does through its in-process server in embedded mode. Created by the first
# migration; it has no API key of its own until one is issued.
DEFAULT_USER_ID = uuid.UUID("00000000-0000-0000-0000-000000000001")

JSONType = JSON().with_variant(JSONB(), "postgresql")


def utcnow() -> datetime:
    return datetime.now(UTC)


def changed_rows(s: Session, statement: Any) -> int:
    """How many rows an UPDATE or DELETE changed: its result is a ``CursorResult``, which ``Session.execute`` is typed
    as the plain ``Result`` without ``rowcount``."""
    return cast(CursorResult[Any], s.execute(statement)).rowcount


class Base(DeclarativeBase):
    pass


class User(Base):
    __tablename__ = "users"
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class UserIdentity(Base):
    """A user who signs in at an OpenID provider, by the provider's issuer and subject
    (``pipeline.security.identities``), with the groups its groups claim listed at the last sign-in."""

    __tablename__ = "user_identities"
    issuer: Mapped[str] = mapped_column(String(500), primary_key=True)
    subject: Mapped[str] = mapped_column(String(255), primary_key=True)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    groups: Mapped[list[str] | None] = mapped_column(JSONType, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    signed_in_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ApiKey(Base):
    """An API key, stored as its SHA-256 digest: the key itself is shown once, when it is issued.

    Keys are 256-bit random tokens, so a fast digest is enough (no password-style stretching needed); the prefix
    is kept in clear to tell keys apart in listings and revoke one.
    """

    __tablename__ = "api_keys"
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    prefix: Mapped[str] = mapped_column(String(16), index=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    label: Mapped[str] = mapped_column(String(255), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The key's limits (pipeline.security.key_limits); NULL is none: every scope, every collection, no expiry.
    scopes: Mapped[list[str] | None] = mapped_column(JSONType, nullable=True)
    collections: Mapped[list[str] | None] = mapped_column(JSONType, nullable=True)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


def milvus_collection_name(collection_id: str | uuid.UUID) -> str:
    """The Milvus collection holding an agentsearch collection's chunks (Milvus names allow no dashes)."""
    return f"c_{uuid.UUID(str(collection_id)).hex}"


class Team(Base):
    """Users sharing collections, each member with a role (``team_members``; ``pipeline.security.roles``)."""

    __tablename__ = "teams"
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    created_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class TeamMember(Base):
    __tablename__ = "team_members"
    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), primary_key=True)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True,
                                               index=True)
    role: Mapped[str] = mapped_column(String(20))  # admin | editor | viewer
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class TeamGroupMember(Base):
    """A member of one of a team's document groups (``pipeline.security.groups``): a group is its members, made by
    the first and gone with the last."""

    __tablename__ = "team_groups"
    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True,
                                               index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Collection(Base):
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
    # Set: the team's collection, reached by its members by their role (``pipeline.security.access``).
    team_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("teams.id"), index=True, nullable=True)
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str | None] = mapped_column(Text)
    embedding_model: Mapped[str] = mapped_column(String(255))
    # Bumped by every change to the indexed content: part of every retrieval cache key.
    index_epoch: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # Seconds per stage ({pre_search, post_search, response}, each optional) for its jobs: pipeline.job.stage_budget.
    stage_timeouts: Mapped[dict[str, float] | None] = mapped_column(JSONType, nullable=True)

    @property
    def milvus_name(self) -> str:
        return milvus_collection_name(self.id)


class DocumentRow(Base):
    __tablename__ = "documents"
    __table_args__ = (
        UniqueConstraint("collection_id", "external_id", name="uq_documents_collection_external"),
        # A collection's ingestion progress (pipeline.ingestion.progress) and the reaper's look for lost documents.
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
    pages_done: Mapped[int | None] = mapped_column(Integer)
    pages_total: Mapped[int | None] = mapped_column(Integer)
    # Its ingestion (pipeline.ingestion.lease): when it was queued and when it ended, the chunks it was indexed as;
    # the task that carries it now (a parsing window or the indexing), the node that started that task (and
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


class DocumentGroup(Base):
    """One group a team collection's document is restricted to: with any, only those groups' members find it
    (``pipeline.security.document_access``); with none, every member of the collection does."""

    __tablename__ = "document_groups"
    document_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(String(100), primary_key=True)


class DocumentFile(Base):
    """An uploaded file waiting to be parsed by a worker (``worker.parsing``), gone once its document is read.
    ``parsed`` is its reading state: who sent it and what its attachments may still become
    (``pipeline.ingestion.attachments``), and the parts of the pages read so far, when a long file is read a window
    of pages at a time."""

    __tablename__ = "document_files"
    document_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("documents.id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    format: Mapped[str] = mapped_column(String(20))
    data: Mapped[bytes] = mapped_column(LargeBinary)
    parsed: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AgentConfigRow(Base):
    __tablename__ = "agent_configs"
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    agent_id: Mapped[str] = mapped_column(String(100))
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str | None] = mapped_column(Text)
    config: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True, index=True)
    trigger_stage: Mapped[str] = mapped_column(String(50), index=True)
    priority: Mapped[int] = mapped_column(Integer, default=0)
    timeout_s: Mapped[float | None] = mapped_column(Float)
    cache_ttl_s: Mapped[int | None] = mapped_column(Integer)
    breaker_fail_max: Mapped[int | None] = mapped_column(Integer)
    breaker_reset_timeout_s: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class CollectionAgent(Base):
    __tablename__ = "collection_agents"
    collection_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("collections.id", ondelete="CASCADE"), primary_key=True
    )
    agent_config_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("agent_configs.id", ondelete="CASCADE"), primary_key=True
    )
    # Per-collection overrides of the config's own priority and enabled flag (NULL: use the config's).
    priority: Mapped[int | None] = mapped_column(Integer)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    # Runs in this config's place when its run fails (same user, same stage; checked by the API).
    fallback_agent_config_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("agent_configs.id", ondelete="SET NULL")
    )
    # A failure that no fallback made good fails the job.
    critical: Mapped[bool] = mapped_column(Boolean, default=False)


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        Index("ix_jobs_user_status", "user_id", "status"),
        Index("ix_jobs_cache_key", "cache_key"),
        Index("ix_jobs_status_deadline", "status", "deadline_at"),
        # Retention (pipeline.operations.retention): the oldest finished jobs, and whether a cached copy names one.
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
    # The document groups its searches were restricted to (pipeline.security.document_access); None: it searched
    # personal collections only, where no document has groups.
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


def _sqlite_engine(url: str, synchronous: str = "FULL") -> Engine:
    """An engine on the embedded mode's file; ``synchronous``: whether a commit waits for the disk (FULL, SQLite's
    default) or only for the WAL's write (NORMAL)."""
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_conn, _record) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA synchronous={synchronous}")
        cur.close()

    return engine


class Database:
    def __init__(self, url: str, pool_size: int = 5) -> None:
        self.url = url
        if url.startswith("sqlite"):
            # Embedded mode: API thread and worker threads share one file; WAL lets readers run beside a writer.
            self.engine = _sqlite_engine(url)
        else:
            self.engine = create_engine(url, pool_pre_ping=True, pool_size=pool_size, max_overflow=10)
        self._pool_size = pool_size
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._progress_engine: Engine | None = None
        self._progress_lock = threading.Lock()

    @property
    def progress_engine(self) -> Engine:
        """Connections for progress reports only (``JobStore.progress``): one round trip each.

        On SQLite (the embedded mode) they commit without waiting for the disk (``synchronous=NORMAL``, which WAL
        keeps consistent): a report survives the process's crash, not the machine's. A report that keeps the state
        and every other write go through ``engine`` and wait for the disk.

        On PostgreSQL each statement commits on its own (autocommit: no ``BEGIN``, no ``COMMIT``) and does not wait
        for the WAL flush (``synchronous_commit`` off for the connection's whole life, set once as it connects), and
        there is no pre-ping: the caller runs a statement again once on a fresh connection when its connection turns
        out broken. A progress report may be lost by a server crash, never corrupted; every other write goes through
        ``engine`` and commits durably. A session setting: behind a proxy that pools by transaction it would reach
        other clients' connections, so this engine needs a direct connection, as the service's is.
        """
        engine = self._progress_engine
        if engine is not None:
            return engine
        with self._progress_lock:
            if self._progress_engine is None and self.url.startswith("sqlite"):
                self._progress_engine = _sqlite_engine(self.url, synchronous="NORMAL")
            if self._progress_engine is None:
                engine = create_engine(self.url, isolation_level="AUTOCOMMIT", pool_size=self._pool_size,
                                       max_overflow=10)

                @event.listens_for(engine, "connect")
                def _no_flush_wait(dbapi_conn, _record) -> None:
                    cur = dbapi_conn.cursor()
                    cur.execute("SET synchronous_commit TO OFF")
                    cur.close()
                    dbapi_conn.commit()  # a no-op when the driver is already in autocommit

                self._progress_engine = engine
            return self._progress_engine

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A transaction: committed when the block ends, rolled back (nothing half-written) when it raises."""
        with self._sessions() as s, s.begin():
            yield s

    def dispose(self) -> None:
        self.engine.dispose()
        with self._progress_lock:
            if self._progress_engine is not None:
                self._progress_engine.dispose()
                self._progress_engine = None


class SeenContent(Base):
    """What an agentic run returned to a user: later runs skip it for a while (``pipeline.agentic.seen``)."""

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


class ProfileRun(Base):
    """One run of a profile set: the job that ran it, and whether a person or the schedule started it."""

    __tablename__ = "profile_runs"
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    profile_set_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("profile_sets.id", ondelete="CASCADE"), index=True)
    job_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), unique=True)
    trigger: Mapped[str] = mapped_column(String(20), default="manual")  # manual | schedule
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AgenticLoop(Base):
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


class RegisteredToolRow(Base):
    """A tool an operator registered (``agentsearch tools add``): what a user's agent config may name.

    Shared by every user: the command, URL, environment and headers are the operator's, never a user's.
    ``spec`` holds the kind's fields as ``pipeline.security.registered_tools.RegisteredTool`` validates them.
    """

    __tablename__ = "registered_tools"
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    kind: Mapped[str] = mapped_column(String(20))  # mcp | http
    spec: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    allow_internal: Mapped[bool] = mapped_column(Boolean, default=False)
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class WebhookRow(Base):
    """A user's completion webhook: where a job's end is posted, signed with the webhook's secret.

    The secret is kept as it was issued (``whsec_<base64>``), unlike an API key's digest: every delivery is signed
    with it, so the service must be able to read it back. It is returned once, by create and rotate-secret, and
    never listed. ``status``: active, disabled (by its user), or failing (a delivery exhausted its retry window).
    """

    __tablename__ = "webhooks"
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # Set: the webhook hears of every job over this collection (any member's), while its user may edit it.
    collection_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("collections.id", ondelete="CASCADE"),
                                                            index=True, nullable=True)
    url: Mapped[str] = mapped_column(Text)
    events: Mapped[list[str]] = mapped_column(JSONType, default=list)
    description: Mapped[str] = mapped_column(Text, default="")
    secret: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(20), default="active")  # active | disabled | failing
    failing_since: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class WebhookDeliveryRow(Base):
    """One event for one webhook: its body is fixed when the job ends, and every attempt sends it under the same
    ``webhook-id`` (``message_id``), so a receiver can tell a retry from a new event.

    ``next_attempt_at`` is when the next automatic attempt is due; a worker that takes the delivery moves it past
    the attempt's timeout first (a lease), so a second worker leaves it alone and a lost worker's delivery comes
    due again. ``sending_until`` is set while an attempt is out (its claim, manual attempts' too): no second
    attempt of the delivery starts before the first is recorded or its claim lapses (a lost worker's), and the
    claims of one user's deliveries are what its attempts in flight are counted by.
    """

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        Index("ix_webhook_deliveries_status_next", "status", "next_attempt_at"),
        Index("ix_webhook_deliveries_created_at", "created_at"),  # retention: the oldest first
        Index("ix_webhook_deliveries_sending_until", "sending_until",
              postgresql_where=text("sending_until IS NOT NULL"), sqlite_where=text("sending_until IS NOT NULL")),
        # One delivery of an event per webhook, however often the job's end is recorded.
        UniqueConstraint("webhook_id", "job_id", "event", name="uq_webhook_deliveries_webhook_job_event"),
    )
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    webhook_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("webhooks.id", ondelete="CASCADE"), index=True)
    # A plain value, no foreign key: the log of what was sent outlives the job.
    job_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    event: Mapped[str] = mapped_column(String(50))
    message_id: Mapped[str] = mapped_column(String(64), unique=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    status: Mapped[str] = mapped_column(String(20), default="pending")  # pending | delivered | failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    sending_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    delivered_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class WebhookAttemptRow(Base):
    """One try of a delivery: when, how long, what the receiver answered or why nothing reached it."""

    __tablename__ = "webhook_attempts"
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    delivery_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("webhook_deliveries.id", ondelete="CASCADE"),
                                                   index=True)
    number: Mapped[int] = mapped_column(Integer)
    manual: Mapped[bool] = mapped_column(Boolean, default=False)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    duration_ms: Mapped[float] = mapped_column(Float, default=0.0)
    status_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)


class UserLimitRow(Base):
    """An operator's limits for one user (``agentsearch users limits``); a NULL column keeps the default from the
    settings, so changing a default reaches every user who was not given a value of their own."""

    __tablename__ = "user_limits"
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    searches_per_minute: Mapped[int | None] = mapped_column(Integer)
    reads_per_minute: Mapped[int | None] = mapped_column(Integer)
    ingest_per_minute: Mapped[int | None] = mapped_column(Integer)
    max_running_jobs: Mapped[int | None] = mapped_column(Integer)
    max_documents: Mapped[int | None] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)


class ConversationRow(Base):
    """A user's conversation: the questions asked in it follow one another (``pipeline.job.conversation``)."""

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


class AuditEvent(Base):
    """One change or search: who (user and key prefix, ``session`` or ``operator``), when, what, over which team or
    collection (``pipeline.security.audit``). Plain values, no foreign keys: the trail outlives what it names.

    Append-only for the service: on PostgreSQL a trigger (migration 0017) refuses every UPDATE, and every DELETE
    but the retention pruner's, which sets ``agentsearch.audit_prune`` for its own transaction."""

    __tablename__ = "audit_events"
    __table_args__ = (
        Index("ix_audit_events_team_id", "team_id", "id"),
        Index("ix_audit_events_at", "at"),  # retention: the oldest first; the operator's --since
    )
    # A counter, not a uuid: the order events were written in, what the pages' cursor follows.
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
                                    autoincrement=True)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    actor_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, index=True)
    key_prefix: Mapped[str] = mapped_column(String(16), default="")
    team_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    collection_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    action: Mapped[str] = mapped_column(String(64))
    target_type: Mapped[str] = mapped_column(String(32), default="")
    target_id: Mapped[str] = mapped_column(String(512), default="")
    details: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    request_id: Mapped[str | None] = mapped_column(String(64))
    ip: Mapped[str | None] = mapped_column(String(64))
