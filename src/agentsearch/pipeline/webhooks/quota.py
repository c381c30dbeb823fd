"""How much of the service one user's webhooks may take: how many webhooks, and how many attempts out at once.

- ``webhook_count``: a user's webhooks, whatever their status (a disabled or failing one can be enabled again);
  ``POST /v1/webhooks`` refuses one past ``AGENTSEARCH_WEBHOOK_MAX_PER_USER``, since every webhook turns each job's
  end into one more request.
- ``attempts_in_flight``: a user's deliveries with an attempt out (a claim, ``sending_until``, not lapsed); the
  courier defers an attempt past ``AGENTSEARCH_WEBHOOK_MAX_IN_FLIGHT_PER_USER``, so one user's slow receivers
  hold that many worker threads at most and everyone else's deliveries go by.
- ``deliveries_waiting``: how many of a user's deliveries a deferred one waits among, to space its return by.
- ``hold_user``: counts and the write they decide are one step, however many workers or API processes race.

Usage::

    with db.session() as s:
        hold_user(s, user_id)                        # until the transaction ends
        if attempts_in_flight(s, user_id, now) < cap:
            ...                                      # claim one
"""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session

from agentsearch.pipeline.platform.tables.webhooks import WebhookDeliveryRow, WebhookRow

# The first key of PostgreSQL's two-key advisory locks: these locks apart from any other the database takes.
LOCK_SPACE = 0x57484B53  # "WHKS"


def hold_user(s: Session, user_id: uuid.UUID) -> None:
    """Until ``s``'s transaction ends, no other transaction that holds the same user gets past this call.

    PostgreSQL: a transaction-level advisory lock keyed by the user (two users may share a key and then wait on
    each other for a moment, nothing worse), taken before the counting reads, which then see every commit made
    under it. SQLite lets one writer in at a time: a first write, even one that changes nothing, holds the others
    off until the commit, and the reads after it see the latest state.
    """
    if s.get_bind().dialect.name == "postgresql":
        key = int.from_bytes(user_id.bytes[:4], "big", signed=True)
        s.execute(text("SELECT pg_advisory_xact_lock(:space, :key)"), {"space": LOCK_SPACE, "key": key})
    else:
        s.execute(update(WebhookRow).where(WebhookRow.user_id == user_id)
                  .values(status=WebhookRow.status, updated_at=WebhookRow.updated_at)
                  .execution_options(synchronize_session=False))


def webhook_count(s: Session, user_id: uuid.UUID) -> int:
    return s.scalar(select(func.count()).select_from(WebhookRow).where(WebhookRow.user_id == user_id)) or 0


def deliveries_waiting(s: Session, user_id: uuid.UUID, until: datetime) -> int:
    """A user's pending deliveries due by ``until``: how many a deferred attempt waits its turn among."""
    return s.scalar(
        select(func.count()).select_from(WebhookDeliveryRow)
        .join(WebhookRow, WebhookRow.id == WebhookDeliveryRow.webhook_id)
        .where(WebhookRow.user_id == user_id, WebhookDeliveryRow.status == "pending",
               WebhookDeliveryRow.next_attempt_at <= until)
    ) or 0


def attempts_in_flight(s: Session, user_id: uuid.UUID, now: datetime) -> int:
    return s.scalar(
        select(func.count()).select_from(WebhookDeliveryRow)
        .join(WebhookRow, WebhookRow.id == WebhookDeliveryRow.webhook_id)
        .where(WebhookRow.user_id == user_id, WebhookDeliveryRow.sending_until.is_not(None),
               WebhookDeliveryRow.sending_until > now)
    ) or 0
