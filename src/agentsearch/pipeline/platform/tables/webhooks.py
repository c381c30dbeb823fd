"""Completion webhooks: each user's webhooks, the events delivered to them and every attempt.

Every table is on ``agentsearch.pipeline.platform.db.Base``'s metadata, which Alembic compares its migrations with."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, DateTime, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint, Uuid, text
from sqlalchemy.orm import Mapped, mapped_column

from agentsearch.pipeline.platform.db import Base, JSONType, utcnow


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
