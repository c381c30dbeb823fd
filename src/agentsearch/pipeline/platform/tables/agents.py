"""Agent configurations, the collections they run on, and the tools an operator registered.

Every table is on ``agentsearch.pipeline.platform.db.Base``'s metadata, which Alembic compares its migrations with."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, DateTime, Float, ForeignKey, Integer, String, Text, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from agentsearch.pipeline.platform.db import Base, JSONType, utcnow


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


class CollectionAgentRow(Base):
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


class RegisteredToolRow(Base):
    """A tool an operator registered (``agentsearch tools add``): what a user's agent config may name.

    Shared by every user: the command, URL, environment and headers are the operator's, never a user's.
    ``spec`` holds the kind's fields as ``agentsearch.pipeline.security.registered_tools.RegisteredTool`` validates
    them.
    """

    __tablename__ = "registered_tools"
    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    kind: Mapped[str] = mapped_column(String(20))  # mcp | http
    spec: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    allow_internal: Mapped[bool] = mapped_column(Boolean, default=False)
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
