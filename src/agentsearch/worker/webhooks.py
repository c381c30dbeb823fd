"""Celery tasks of the completion webhooks: send a delivery, and sweep for deliveries that are due.

- ``deliver_webhook(delivery_id, due)``: one attempt (``agentsearch.pipeline.webhooks.courier``). A retry due within
  ``COUNTDOWN_MAX_S`` is sent again with a countdown; a later one waits in the database (``next_attempt_at``) for
  the sweep, because the Redis broker hands a message held longer than its visibility timeout to a second worker.
  An attempt deferred (its user has ``AGENTSEARCH_WEBHOOK_MAX_IN_FLIGHT_PER_USER`` attempts out) is sent again
  with a countdown of a second or so; the task ends at once and its thread takes the next message.
- ``sweep_webhooks``: periodic (Celery beat; in embedded mode a ``Ticker`` of the API process): every pending
  delivery that is due, enqueued once (``agentsearch.pipeline.webhooks.outbox.due_deliveries`` leases it). It also sends
  what a lost enqueue or a lost worker left behind. Before, it writes the ``job.stale`` deliveries of answers marked
  stale since (``agentsearch.pipeline.webhooks.stale``).

Both are on the ``webhooks`` queue (``agentsearch.worker.app``), which a thread-pool worker consumes (in embedded mode,
a pool of its own: ``agentsearch.worker.embedded``): an attempt mostly waits on the receiver, at most
``AGENTSEARCH_WEBHOOK_TIMEOUT_S`` in all, and one user's attempts out at once are capped, so one user's slow receivers
hold a few threads at most. Importing this module makes every commit that ends a job enqueue its deliveries at once.

Usage::

    deliver_webhook.delay(delivery_id)                # what a job's end does after its commit
    deliver_webhook.delay(delivery_id, manual=True)   # POST /v1/webhooks/{id}/deliveries/{delivery_id}/retry
    app.send_task("agentsearch.sweep_webhooks")
"""

from __future__ import annotations

import logging
from typing import Any

from agentsearch.pipeline.platform.db import utcnow
from agentsearch.pipeline.services import get_services
from agentsearch.pipeline.webhooks.courier import LEASE_MARGIN_S, Courier
from agentsearch.pipeline.webhooks.outbox import due_deliveries, on_new_deliveries
from agentsearch.pipeline.webhooks.schedule import RetrySchedule
from agentsearch.pipeline.webhooks.sender import SendResult, WebhookSender
from agentsearch.pipeline.webhooks.stale import announce_stale
from agentsearch.worker.app import DB_RETRY, LONGEST_RETRY_DELAY_S, app

log = logging.getLogger("agentsearch.worker")
# Far below the broker's visibility timeout (agentsearch.worker.app): a countdown this short is never delivered twice
# for it.
COUNTDOWN_MAX_S = 2 * LONGEST_RETRY_DELAY_S
SWEEP_BATCH = 500


def _courier() -> Courier:
    services = get_services()
    settings = services.settings
    sender = WebhookSender(settings.egress_policy(), timeout_s=settings.webhook_timeout_s)

    def counted(result: SendResult) -> None:
        services.metrics.record_webhook_attempt(result.outcome)

    return Courier(services.db, sender, RetrySchedule.from_settings(settings), timeout_s=settings.webhook_timeout_s,
                   max_in_flight=settings.webhook_max_in_flight_per_user, on_attempt=counted)


@app.task(name="agentsearch.deliver_webhook", **DB_RETRY)
def deliver_webhook(delivery_id: str, due: str | None = None, manual: bool = False) -> dict[str, Any]:
    report = _courier().attempt(delivery_id, due=due, manual=manual)
    retry_in_s = report.retry_in_s if report.outcome in ("retry", "deferred") else None
    if retry_in_s is not None and retry_in_s <= COUNTDOWN_MAX_S:
        try:
            deliver_webhook.apply_async((delivery_id, report.due), {"manual": True} if manual else None,
                                        countdown=retry_in_s)
        except Exception:  # an automatic one is in the database: the sweep sends it once it is due
            log.warning("could not enqueue webhook delivery %s again%s", delivery_id,
                        "; the manual attempt is lost" if manual else "; the sweep will", exc_info=True)
    elif report.outcome == "gave_up":
        log.warning("webhook delivery %s given up: %s", delivery_id, report.detail)
    return report.as_dict()


@app.task(name="agentsearch.sweep_webhooks", **DB_RETRY)
def sweep_webhooks() -> int:
    """Periodic: write the ``job.stale`` deliveries of answers marked stale since the last sweep
    (``agentsearch.pipeline.webhooks.stale``), then enqueue every pending delivery whose attempt is due; how many."""
    settings = get_services().settings
    announce_stale(get_services().db)
    due = due_deliveries(get_services().db, utcnow(), lease_s=settings.webhook_timeout_s + LEASE_MARGIN_S,
                         limit=SWEEP_BATCH)
    for delivery_id, token in due:
        deliver_webhook.delay(delivery_id, token)
    if due:
        log.info("webhooks: %d deliveries due", len(due))
    return len(due)


def _enqueue(deliveries: list[tuple[str, str]]) -> None:
    for delivery_id, token in deliveries:
        deliver_webhook.delay(delivery_id, token)


on_new_deliveries(_enqueue)
