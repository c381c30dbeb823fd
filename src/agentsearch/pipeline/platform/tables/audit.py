"""The audit trail: one row per change or search, append-only.

Every table is on ``agentsearch.pipeline.platform.db.Base``'s metadata, which Alembic compares its migrations with."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, Index, Integer, String, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from agentsearch.pipeline.platform.db import Base, JSONType, utcnow


class AuditEventRow(Base):
    """One change or search: who (user and key prefix, ``session`` or ``operator``), when, what, over which team or
    collection (``agentsearch.pipeline.security.audit``). Plain values, no foreign keys: the trail outlives what it
    names.

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
