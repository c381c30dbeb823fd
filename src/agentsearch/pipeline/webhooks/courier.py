"""One attempt of one delivery: take it, send it, record what happened and when to try again.

Taking a delivery is a short transaction: the row is read, checked (still pending, due, its webhook active, no
attempt of it out), and taken by one conditional UPDATE only if nobody took it since it was read. Taking it sets
its claim (``sending_until``) and moves its ``next_attempt_at`` (the lease) to the same moment: the attempt's
timeout plus ``LEASE_MARGIN_S``. The sender holds an attempt to that timeout as a whole, connection to answer
(``agentsearch.pipeline.webhooks.sender``), so the claim outlasts the attempt: while its request is out the sweep and
every other worker leave the delivery alone, and two attempts of one delivery are never out at once. The request
itself holds no transaction. Recording is a second one: the attempt's row, the claim released, and the delivery
delivered, scheduled again (``RetrySchedule``) or given up. Whatever the send raises (a URL stored before it was
checked as it is now, a bug) is recorded as a failed attempt with its reason and scheduled again like any other,
never left to leave the delivery pending with nothing logged. A delivery given up marks its webhook ``failing``:
no new deliveries are made for it, and its other pending ones end ``failed`` when they come due, until its user
enables it again.

One user's attempts out at once are at most ``max_in_flight`` (``agentsearch.pipeline.webhooks.quota``). Past it an
attempt is deferred, not made: its delivery comes due again in about ``DEFER_S`` (jittered) and the task ends at once,
so a user whose receivers are slow holds that many worker threads at most, never the whole worker, and the next
user's delivery in the queue goes out. A deferred attempt counts as no attempt.

At least once: a worker lost between the send and the record leaves the claim and the lease to run out, and the
delivery is sent again under the same ``webhook-id``; a receiver drops what it has seen by that id.

A manual attempt (``manual=True``: ``POST /v1/webhooks/{id}/deliveries/{delivery_id}/retry``) sends whatever the
delivery's status and its webhook's; delivered, it marks the delivery delivered, failed, it changes no schedule.
It waits its turn like any other: deferred while another attempt of the delivery is out or its user is at the cap.

Usage::

    courier = Courier(db, WebhookSender(policy, timeout_s=10), RetrySchedule(), timeout_s=10, max_in_flight=2)
    report = courier.attempt(delivery_id, due=token)   # AttemptReport(outcome="retry", retry_in_s=4.2, ...)
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from agentsearch.pipeline.platform.db import Database, changed_rows, utcnow
from agentsearch.pipeline.platform.tables.webhooks import WebhookAttemptRow, WebhookDeliveryRow, WebhookRow
from agentsearch.pipeline.webhooks.events import encode
from agentsearch.pipeline.webhooks.outbox import aware, due_token
from agentsearch.pipeline.webhooks.quota import attempts_in_flight, deliveries_waiting, hold_user
from agentsearch.pipeline.webhooks.schedule import RetrySchedule
from agentsearch.pipeline.webhooks.sender import SendResult, WebhookSender

log = logging.getLogger("agentsearch.webhooks")
# A countdown's message may run a little before the moment the database holds (clocks of two hosts).
EARLY_TOLERANCE = timedelta(seconds=1)
# Beyond the attempt's own deadline: DNS (not bounded by it), the record's transaction.
LEASE_MARGIN_S = 30.0
RACED = "another worker took it first"
BUSY = "another attempt of it is out"
MANUAL_TRIES = 5
# A deferred attempt comes due again after half to one and a half of DEFER_S: soon enough for a receiver that
# answers in milliseconds, spread so the deferred attempts of one user do not all come back together. With more
# than DEFER_RETURNS_PER_S of the user's deliveries waiting, the wait grows with them (up to DEFER_MAX_S), so that
# all of them together come back about that often a second: a backlog of thousands behind slow receivers is not
# thousands of transactions a second.
DEFER_S = 1.0
DEFER_RETURNS_PER_S = 20
DEFER_MAX_S = 60.0


@dataclass(frozen=True)
class AttemptReport:
    """``outcome``: delivered, retry (``retry_in_s``, ``due`` token), gave_up, failed (a manual attempt that did not
    get through), deferred (nothing sent yet: its user is at its cap of attempts out, or, for a manual attempt,
    another attempt of the delivery is out; try again in ``retry_in_s``, with ``due`` for an automatic one), or
    skipped (nothing sent: gone, taken by another worker, not due, already ended)."""

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
    claim: datetime


class Courier:
    def __init__(self, db: Database, sender: WebhookSender, schedule: RetrySchedule, timeout_s: float = 10.0,
                 max_in_flight: int = 2, clock: Callable[[], datetime] = utcnow,
                 rng: Callable[[], float] = random.random,
                 on_attempt: Callable[[SendResult], None] | None = None) -> None:
        self.db, self.sender, self.schedule = db, sender, schedule
        self.lease = timedelta(seconds=timeout_s + LEASE_MARGIN_S)
        self.max_in_flight = max_in_flight
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
        result = self._send(taken)
        if self.on_attempt is not None:
            self.on_attempt(result)
        return self._record(delivery_id, taken, result, manual)

    def _send(self, taken: _Taken) -> SendResult:
        """What the sender made of the attempt; anything it raised is a failed attempt (``error``) with its reason.

        Raised on, the claim would be left to lapse and the sweep would send the delivery again, to meet the same
        exception, for ever: pending, with no attempt logged and no end.
        """
        started = time.perf_counter()
        try:
            return self.sender.send(taken.url, taken.secret, taken.message_id, taken.body)
        except Exception as exc:  # recorded as the attempt's error, and scheduled again
            log.warning("a webhook attempt to %r could not be made", taken.url, exc_info=True)
            return SendResult("error", round((time.perf_counter() - started) * 1000, 3),
                              error=f"not sent: {type(exc).__name__}: {exc}"[:1000])

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
            if not manual:
                if row.status != "pending":
                    return AttemptReport(delivery_id, "skipped", detail=f"already {row.status}")
                next_at = aware(row.next_attempt_at) if row.next_attempt_at is not None else now
                # Due, or sent by the sweep that leased it with this very token.
                if next_at > now + EARLY_TOLERANCE and due != due_token(next_at):
                    return AttemptReport(delivery_id, "skipped", detail="not due")
                if hook.status != "active":
                    error = f"not sent: the webhook is {hook.status}"
                    if not _swap(s, row, {"status": "failed", "next_attempt_at": None, "last_error": error}):
                        return AttemptReport(delivery_id, "skipped", detail=RACED)
                    return AttemptReport(delivery_id, "gave_up", detail=error)
            hold_user(s, hook.user_id)
            if row.sending_until is not None and aware(row.sending_until) > now:
                # A manual attempt is out (it moves no lease), or an automatic one when a manual one comes.
                return self._defer(s, row, hook.user_id, now, manual, BUSY)
            if attempts_in_flight(s, hook.user_id, now) >= self.max_in_flight:
                return self._defer(s, row, hook.user_id, now, manual,
                                   f"its user has {self.max_in_flight} attempts out, the most at once")
            claim = now + self.lease
            changes: dict = {"attempts": row.attempts + 1, "sending_until": claim}
            if not manual:
                changes["next_attempt_at"] = claim
            if not _swap(s, row, changes):
                return AttemptReport(delivery_id, "skipped", detail=RACED)
            return _Taken(row.attempts + 1, hook.url, hook.secret, row.message_id, encode(row.payload), now, claim)

    def _defer(self, s: Session, row: WebhookDeliveryRow, user_id: uuid.UUID, now: datetime, manual: bool,
               detail: str) -> AttemptReport:
        """Nothing sent, not its turn yet (``detail`` says why). An automatic attempt's delivery comes due again
        shortly (the sweep sends it then if the task's own message is lost); a manual one changes nothing."""
        waiting = deliveries_waiting(s, user_id, now + timedelta(seconds=DEFER_MAX_S))
        spread = max(1.0, waiting / DEFER_RETURNS_PER_S)
        delivery_id, delay = str(row.id), min(DEFER_S * (0.5 + self.rng()) * spread, DEFER_MAX_S)
        if manual:
            return AttemptReport(delivery_id, "deferred", retry_in_s=delay, detail=detail)
        later = now + timedelta(seconds=delay)
        if not _swap(s, row, {"next_attempt_at": later}):
            return AttemptReport(delivery_id, "skipped", detail=RACED)
        return AttemptReport(delivery_id, "deferred", retry_in_s=delay, due=due_token(later), detail=detail)

    def _record(self, delivery_id: str, taken: _Taken, result: SendResult, manual: bool) -> AttemptReport:
        with self.db.session() as s:
            row = s.scalar(select(WebhookDeliveryRow).where(WebhookDeliveryRow.id == uuid.UUID(delivery_id))
                           .with_for_update())
            if row is None:
                return AttemptReport(delivery_id, "skipped", taken.number, detail="the webhook was deleted")
            s.add(WebhookAttemptRow(delivery_id=row.id, number=taken.number, manual=manual,
                                    started_at=taken.started_at, duration_ms=result.duration_ms,
                                    status_code=result.status_code, error=result.error))
            # This attempt's claim only: one that lapsed (a stalled worker) may have been taken by another since.
            if row.sending_until is not None and aware(row.sending_until) == taken.claim:
                row.sending_until = None
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


def _swap(s: Session, row: WebhookDeliveryRow, changes: dict) -> bool:
    """Apply ``changes`` only if the delivery is as ``row`` read it (one conditional UPDATE, atomic in PostgreSQL
    and in SQLite alike: SQLite has no row locks, so a SELECT ... FOR UPDATE would not keep a second worker out)."""
    def unchanged(column, seen):
        return column.is_(None) if seen is None else column == seen

    return changed_rows(
        s,
        update(WebhookDeliveryRow)
        .where(WebhookDeliveryRow.id == row.id, WebhookDeliveryRow.attempts == row.attempts,
               WebhookDeliveryRow.status == row.status,
               unchanged(WebhookDeliveryRow.next_attempt_at, row.next_attempt_at),
               unchanged(WebhookDeliveryRow.sending_until, row.sending_until))
        .values(**changes)
        .execution_options(synchronize_session=False),
    ) == 1
