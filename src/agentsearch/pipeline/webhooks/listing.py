"""A user's webhooks and their delivery log, as their owner reads them, and the removal of a webhook.

Whose a webhook is, is checked before (``agentsearch.pipeline.security.access.Access.owned``); these work within the
caller's session.

Usage::

    with db.session() as s:
        webhooks_of(s, user_id)                                    # oldest first
        for delivery, attempts in deliveries_of(s, webhook_id, limit=50):   # newest first, attempts in order
            ...
        delivery_of(s, webhook_id, delivery_id)                   # None: missing, or another webhook's
        remove_webhook(s, webhook)                                 # its deliveries and attempts go with it
"""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from agentsearch.pipeline.platform.tables.webhooks import WebhookAttemptRow, WebhookDeliveryRow, WebhookRow


def webhooks_of(s: Session, user_id: uuid.UUID) -> list[WebhookRow]:
    """The user's webhooks, oldest first."""
    return list(s.scalars(select(WebhookRow).where(WebhookRow.user_id == user_id)
                          .order_by(WebhookRow.created_at, WebhookRow.id)))


def deliveries_of(s: Session, webhook_id: uuid.UUID,
                  limit: int) -> list[tuple[WebhookDeliveryRow, list[WebhookAttemptRow]]]:
    """The webhook's newest ``limit`` deliveries, newest first, each with its attempts by number (two reads)."""
    rows = s.scalars(select(WebhookDeliveryRow).where(WebhookDeliveryRow.webhook_id == webhook_id)
                     .order_by(WebhookDeliveryRow.created_at.desc(), WebhookDeliveryRow.id).limit(limit)).all()
    attempts: dict[uuid.UUID, list[WebhookAttemptRow]] = {row.id: [] for row in rows}
    if rows:
        for attempt in s.scalars(select(WebhookAttemptRow).where(WebhookAttemptRow.delivery_id.in_(list(attempts)))
                                 .order_by(WebhookAttemptRow.number)):
            attempts[attempt.delivery_id].append(attempt)
    return [(row, attempts[row.id]) for row in rows]


def delivery_of(s: Session, webhook_id: uuid.UUID, delivery_id: uuid.UUID) -> WebhookDeliveryRow | None:
    """The webhook's delivery of this id; None when there is none, or it is another webhook's."""
    row = s.get(WebhookDeliveryRow, delivery_id)
    return row if row is not None and row.webhook_id == webhook_id else None


def remove_webhook(s: Session, webhook: WebhookRow) -> None:
    """Delete the webhook in the caller's transaction; the database deletes its deliveries and their attempts with
    it (``ON DELETE CASCADE``), so a pending delivery is never sent."""
    s.delete(webhook)
