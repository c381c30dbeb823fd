"""One attempt of one delivery: take it, send it, record what happened and when to try again.

Taking a delivery is a short transaction: the row is read, checked (still pending, due, its webhook active), and
taken by one conditional UPDATE that moves its ``next_attempt_at`` past the attempt's timeout (the lease) only if
nobody took it since it was read; another worker or the sweep then leaves it alone while the request is out. The
request itself holds no transaction. Recording is a second one: the attempt's
row, and the delivery delivered, scheduled again (``RetrySchedule``) or given up. A delivery given up marks its
webhook ``failing``: no new deliveries are made for it, and its other pending ones end ``failed`` when they come
due, until its user enables it again.

At least once: a worker lost between the send and the record leaves the lease to run out, and the delivery is
sent again under the same ``webhook-id``; a receiver drops what it has seen by that id.

A manual attempt (``manual=True``: ``POST /v1/webhooks/{id}/deliveries/{delivery_id}/retry``) sends whatever the
delivery's status and its webhook's; delivered, it marks the delivery delivered, failed, it changes no schedule.

Usage::

    courier = Courier(db, WebhookSender(policy, timeout_s=10), RetrySchedule(), timeout_s=10)
    report = courier.attempt(delivery_id, due=token)   # AttemptReport(outcome="retry", retry_in_s=4.2, ...)
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, update

from pipeline.platform.db import Database, WebhookAttemptRow, WebhookDeliveryRow, WebhookRow, utcnow
from pipeline.webhooks.events import encode
from pipeline.webhooks.outbox import aware, due_token
from pipeline.webhooks.schedule import RetrySchedule
from pipeline.webhooks.sender import SendResult, WebhookSender

log = logging.getLogger("agentsearch.webhooks")
# A countdown's message may run a little before the moment the database holds (clocks of two hosts).
EARLY_TOLERANCE = timedelta(seconds=1)
# Beyond the attempt's own timeout: DNS, the connection, the record's transaction.
LEASE_MARGIN_S = 30.0
RACED = "another worker took it first"
MANUAL_TRIES = 5


@dataclass(frozen=True)
class AttemptReport:
    """``outcome``: delivered, retry (``retry_in_s``, ``due`` token), gave_up, failed (a manual attempt that did not
    get through), or skipped (nothing sent: gone, taken by another worker, not due, already ended)."""

    delivery_id: str
    outcome: str
    attempt: int | None = None
    retry_in_s: float | None = None
    due: str | None = None
    detail: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class _Taken:
    number: int
    url: str
    secret: str
    message_id: str
    body: str
    started_at: datetime


class Courier:
    def __init__(self, db: Database, sender: WebhookSender, schedule: RetrySchedule, timeout_s: float = 10.0,
                 clock: Callable[[], datetime] = utcnow, rng: Callable[[], float] = random.random,
                 on_attempt: Callable[[SendResult], None] | None = None) -> None:
        self.db, self.sender, self.schedule = db, sender, schedule
        self.lease = timedelta(seconds=timeout_s + LEASE_MARGIN_S)
        self.clock, self.rng, self.on_attempt = clock, rng, on_attempt

    def attempt(self, delivery_id: str, due: str | None = None, manual: bool = False) -> AttemptReport:
        taken = self._take(delivery_id, due, manual)
        for _ in range(MANUAL_TRIES):
            # A manual attempt that met another one being taken goes after it, not instead of the user's request.
            if not (manual and isinstance(taken, AttemptReport) and taken.detail == RACED):
                break
            taken = self._take(delivery_id, due, manual)
        if isinstance(taken, AttemptReport):
            return taken
        result = self.sender.send(taken.url, taken.secret, taken.message_id, taken.body)
        if self.on_attempt is not None:
            self.on_attempt(result)
        return self._record(delivery_id, taken, result, manual)

    def _take(self, delivery_id: str, due: str | None, manual: bool) -> _Taken | AttemptReport:
        key = uuid.UUID(delivery_id)
        with self.db.session() as s:
            row = s.get(WebhookDeliveryRow, key)
            if row is None:
                return AttemptReport(delivery_id, "skipped", detail="no such delivery")
            hook = s.get(WebhookRow, row.webhook_id)
            if hook is None:  # deleted since the row was read: its deliveries go with it
                return AttemptReport(delivery_id, "skipped", detail="the webhook was deleted")
            now = self.clock()
            seen_next, seen_attempts = row.next_attempt_at, row.attempts
            changes: dict = {"attempts": seen_attempts + 1}
            if not manual:
                if row.status != "pending":
                    return AttemptReport(delivery_id, "skipped", detail=f"already {row.status}")
                next_at = aware(seen_next) if seen_next is not None else now
                # Due, or sent by the sweep that leased it with this very token.
                if next_at > now + EARLY_TOLERANCE and due != due_token(next_at):
                    return AttemptReport(delivery_id, "skipped", detail="not due")
                if hook.status != "active":
                    changes = {"status": "failed", "next_attempt_at": None,
                               "last_error": f"not sent: the webhook is {hook.status}"}
                else:
                    changes["next_attempt_at"] = now + self.lease
            # Taken only if nobody took it since it was read: one conditional UPDATE, atomic in PostgreSQL and in
            # SQLite alike (SQLite has no row locks, so a SELECT ... FOR UPDATE would not keep a second worker out).
            taken = s.execute(
                update(WebhookDeliveryRow)
                .where(WebhookDeliveryRow.id == key, WebhookDeliveryRow.attempts == seen_attempts,
                       WebhookDeliveryRow.status == row.status,
                       WebhookDeliveryRow.next_attempt_at.is_(None) if seen_next is None
                       else WebhookDeliveryRow.next_attempt_at == seen_next)
                .values(**changes)
                .execution_options(synchronize_session=False)
            ).rowcount
            if taken != 1:
                return AttemptReport(delivery_id, "skipped", detail=RACED)
            if changes.get("status") == "failed":
                return AttemptReport(delivery_id, "gave_up", detail=changes["last_error"])
            return _Taken(seen_attempts + 1, hook.url, hook.secret, row.message_id, encode(row.payload), now)

    def _record(self, delivery_id: str, taken: _Taken, result: SendResult, manual: bool) -> AttemptReport:
        with self.db.session() as s:
            row = s.scalar(select(WebhookDeliveryRow).where(WebhookDeliveryRow.id == uuid.UUID(delivery_id))
                           .with_for_update())
            if row is None:
                return AttemptReport(delivery_id, "skipped", taken.number, detail="the webhook was deleted")
            s.add(WebhookAttemptRow(delivery_id=row.id, number=taken.number, manual=manual,
                                    started_at=taken.started_at, duration_ms=result.duration_ms,
                                    status_code=result.status_code, error=result.error))
            now = self.clock()
            if result.ok:
                row.status, row.next_attempt_at, row.last_error = "delivered", None, None
                row.delivered_at = row.delivered_at or now
                return AttemptReport(delivery_id, "delivered", taken.number)
            row.last_error = result.error
            if manual:
                return AttemptReport(delivery_id, "failed", taken.number, detail=result.error)
            if row.status != "pending":  # a manual attempt ended it meanwhile
                return AttemptReport(delivery_id, "skipped", taken.number, detail=f"already {row.status}")
            elapsed = (now - aware(row.created_at)).total_seconds()
            delay = self.schedule.next_delay(row.attempts, elapsed, self.rng)
            if delay is None:
                row.status, row.next_attempt_at = "failed", None
                hook = s.get(WebhookRow, row.webhook_id)
                if hook is not None and hook.status == "active":
                    hook.status, hook.failing_since = "failing", now
                    log.warning("webhook %s is failing: delivery %s gave up after %d attempts (%s)", hook.id,
                                delivery_id, row.attempts, result.error)
                return AttemptReport(delivery_id, "gave_up", taken.number, detail=result.error)
            row.next_attempt_at = now + timedelta(seconds=delay)
            return AttemptReport(delivery_id, "retry", taken.number, retry_in_s=delay,
                                 due=due_token(row.next_attempt_at), detail=result.error)
