"""Users, how they sign in (OpenID identities, API keys, console sessions) and the limits an operator set for one.

Every table is on ``agentsearch.pipeline.platform.db.Base``'s metadata, which Alembic compares its migrations with."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Integer, String, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from agentsearch.pipeline.platform.db import Base, JSONType, utcnow

# The local user: owns what the CLI does through its in-process server in embedded mode. Created by the first
# migration; it has no API key of its own until one is issued.
DEFAULT_USER_ID = uuid.UUID("00000000-0000-0000-0000-000000000001")


class UserRow(Base):
    __tablename__ = "users"
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class UserIdentityRow(Base):
    """A user who signs in at an OpenID provider, by the provider's issuer and subject
    (``agentsearch.pipeline.security.identities``), with the groups its groups claim listed at the last sign-in."""

    __tablename__ = "user_identities"
    issuer: Mapped[str] = mapped_column(String(500), primary_key=True)
    subject: Mapped[str] = mapped_column(String(255), primary_key=True)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    groups: Mapped[list[str] | None] = mapped_column(JSONType, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    signed_in_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ApiKeyRow(Base):
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
    # The key's limits (agentsearch.pipeline.security.key_limits); NULL is none: every scope, every collection, no
    # expiry.
    scopes: Mapped[list[str] | None] = mapped_column(JSONType, nullable=True)
    collections: Mapped[list[str] | None] = mapped_column(JSONType, nullable=True)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


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


class ConsoleSessionRow(Base):
    """A console session (``agentsearch.pipeline.security.sessions``): only its token's digest is stored."""

    __tablename__ = "console_sessions"
    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), index=True)
