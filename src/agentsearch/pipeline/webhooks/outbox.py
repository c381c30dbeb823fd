"""The outbox: a job's end writes its webhook deliveries in the same transaction, so a crash cannot lose one.

``record_job_end`` is called by every place that ends a job (``agentsearch.pipeline.job.job_store.JobStore``: succeed,
fail, cancel, reap, and a submit answered from the cache, whose row is born succeeded). It adds one pending delivery per
active webhook of the job's user subscribed to the event (and of each webhook of the job's collection whose user
may still edit it), due at once; a webhook's user outside the job's document groups
(``agentsearch.pipeline.security.document_access``) gets none. Once the transaction commits, the
listeners registered with ``on_new_deliveries`` hear the new ids (the worker enqueues a send for each); when none
is registered, or the enqueue fails, the periodic sweep finds the rows all the same (``due_deliveries``).

Usage::

    on_new_deliveries(lambda ids: [deliver.delay(i) for i in ids])     # once per process
    with db.session() as s:
        job.status = "failed"
        record_job_end(s, job)             # heard after the commit; nothing heard after a rollback
    due_deliveries(db, utcnow(), lease_s=70, limit=500)                # [(delivery id, due token)], leased
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy import event as orm_event, select, update
from sqlalchemy.orm import Session

from agentsearch.pipeline.platform.db import Database, changed_rows, utcnow
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.platform.tables.webhooks import WebhookDeliveryRow, WebhookRow
from agentsearch.pipeline.security.access import Access
from agentsearch.pipeline.security.document_access import held_tokens, job_visible
from agentsearch.pipeline.security.roles import covers
from agentsearch.pipeline.webhooks.events import event_for, event_payload

log = logging.getLogger("agentsearch.webhooks")

Listener = Callable[[list[tuple[str, str]]], None]
_listeners: list[Listener] = []
_PENDING = "agentsearch.webhook_deliveries"


def on_new_deliveries(listener: Listener) -> None:
    """Call ``listener([(delivery id, due token), ...])`` after each commit that created deliveries; once per
    listener, however often it is registered."""
    if listener not in _listeners:
        _listeners.append(listener)


def due_token(moment: datetime) -> str:
    """A delivery's ``next_attempt_at`` as the text an enqueued attempt carries (``Courier.attempt(due=...)``)."""
    return aware(moment).isoformat()


def aware(moment: datetime) -> datetime:
    # SQLite hands back naive datetimes for timezone-aware columns; they were written in UTC.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _edits(s: Session, user_id: uuid.UUID, collection_id: uuid.UUID) -> bool:
    collection = s.get(CollectionRow, collection_id)
    return collection is not None and covers(Access(s, user_id).held(collection), "editor")


def record_job_end(s: Session, job: JobRow) -> list[WebhookDeliveryRow]:
    """Pending deliveries of the job's end for its user's subscribed, active webhooks, in the caller's
    transaction. Nothing for a status that is not an end, or a user without such webhooks."""
    event = event_for(job.status)
    if event is None:
        return []
    return record_job_event(s, job, event)


def record_job_event(s: Session, job: JobRow, event: str,
                     stale: dict[str, str] | None = None) -> list[WebhookDeliveryRow]:
    """Pending deliveries of ``event`` of the job (its end, or ``job.stale`` with its marks) for the webhooks that
    hear of it, in the caller's transaction; one per webhook and event, however often it is recorded."""
    # The user's own webhooks, and those of the job's collection whose users may still edit it (a member removed
    # from the team, or made a viewer, hears no more).
    mine = (WebhookRow.user_id == job.user_id) & WebhookRow.collection_id.is_(None)
    # And only to a user holding the job's document groups now: a payload carries the answer and its sources, which
    # a member outside the groups the job searched with (or one who left them since) may not find.
    hooks = [h for h in s.scalars(select(WebhookRow).where(mine | (WebhookRow.collection_id == job.collection_id),
                                                            WebhookRow.status == "active")).all()
             if event in (h.events or []) and (h.collection_id is None or _edits(s, h.user_id, job.collection_id))
             and (job.access_groups is None or job_visible(s, job, held_tokens(s, h.user_id)))]
    if not hooks:
        return []
    now = utcnow()
    payload = event_payload(job, event, now, stale)
    rows = [WebhookDeliveryRow(id=uuid.uuid4(), webhook_id=h.id, job_id=job.id, event=event,
                               message_id=f"msg_{uuid.uuid4().hex}", payload=payload, status="pending", attempts=0,
                               next_attempt_at=now, created_at=now)
            for h in hooks]
    s.add_all(rows)
    s.flush()
    pending = s.info.get(_PENDING)
    if pending is None:
        pending = s.info[_PENDING] = []
        orm_event.listen(s, "after_commit", _announce, once=True)
        orm_event.listen(s, "after_rollback", _forget, once=True)
    pending.extend((str(r.id), due_token(now)) for r in rows)
    return rows


def _forget(s: Session) -> None:
    s.info.pop(_PENDING, None)


def _announce(s: Session) -> None:
    ids = s.info.pop(_PENDING, None)
    if not ids:
        return
    for listener in list(_listeners):
        try:
            listener(ids)
        except Exception:  # the job has ended and its rows are committed: the sweep sends them
            log.warning("could not enqueue %d webhook deliveries; the sweep will", len(ids), exc_info=True)


def due_deliveries(db: Database, now: datetime, lease_s: float, limit: int = 500) -> list[tuple[str, str]]:
    """Pending deliveries whose attempt is due, each leased for ``lease_s`` (its ``next_attempt_at`` moved on)
    so the next sweep does not send it again while its attempt waits in the queue; with each, the token that
    attempt claims it with. A lost message's lease runs out and a later sweep sends it again."""
    until = now + timedelta(seconds=lease_s)
    found = []
    with db.session() as s:
        due = s.execute(
            select(WebhookDeliveryRow.id, WebhookDeliveryRow.next_attempt_at)
            .where(WebhookDeliveryRow.status == "pending", WebhookDeliveryRow.next_attempt_at <= now)
            .order_by(WebhookDeliveryRow.next_attempt_at)
            .limit(limit)
        ).all()
        for delivery_id, seen in due:
            # Leased only if no worker took it since it was read (a conditional UPDATE: no row locks needed, so
            # SQLite behaves as PostgreSQL does).
            leased = changed_rows(
                s,
                update(WebhookDeliveryRow)
                .where(WebhookDeliveryRow.id == delivery_id, WebhookDeliveryRow.status == "pending",
                       WebhookDeliveryRow.next_attempt_at == seen)
                .values(next_attempt_at=until)
                .execution_options(synchronize_session=False),
            )
            if leased == 1:
                found.append((str(delivery_id), due_token(until)))
    return found
