"""Completion webhooks: a user's URLs that hear of its jobs' ends, signed; and the log of every delivery attempt.

The secret (``whsec_<base64>``) is shown twice at most: in the answer to create, and to rotate-secret; never in a
listing. Another user's webhook or delivery answers 404 exactly like one that does not exist. A URL is checked
where it enters (``agentsearch.pipeline.webhooks.target``): a host that is, or resolves to, an internal address the
operator did not allow is refused with 422 naming ``["body", "url"]``, and nothing is written. A user has at most
``AGENTSEARCH_WEBHOOK_MAX_PER_USER`` webhooks (each turns every job's end into one more request): one more is
refused with 409 until one is deleted.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request, Response

from agentsearch.api.audit import audit
from agentsearch.api.auth import CurrentUser
from agentsearch.api.errors import not_found, unprocessable
from agentsearch.api.request_guard import GuardedRoute
from agentsearch.api.roles import Reach
from agentsearch.api.schemas import WebhookCreate, WebhookUpdate
from agentsearch.api.services import AppServices
from agentsearch.api.worker_side import deliver_webhook
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.webhooks import WebhookAttemptRow, WebhookDeliveryRow, WebhookRow
from agentsearch.pipeline.webhooks.listing import deliveries_of, delivery_of, remove_webhook, webhooks_of
from agentsearch.pipeline.webhooks.quota import hold_user, webhook_count
from agentsearch.pipeline.webhooks.secret import new_secret
from agentsearch.pipeline.webhooks.target import TargetRefused, checked_url

router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"], route_class=GuardedRoute)
log = logging.getLogger("agentsearch.api")


def _checked_url(url: str, settings: Settings) -> str:
    try:
        return checked_url(url, settings.egress_policy())
    except TargetRefused as exc:
        raise unprocessable(("body", "url"), str(exc)) from None


def _out(row: WebhookRow) -> dict[str, Any]:
    return {"id": str(row.id), "url": row.url, "events": list(row.events or []), "description": row.description,
            "collection_id": str(row.collection_id) if row.collection_id is not None else None,
            "status": row.status, "failing_since": row.failing_since, "created_at": row.created_at,
            "updated_at": row.updated_at}


@router.post("", status_code=201)
def create_webhook(body: WebhookCreate, user_id: CurrentUser, request: Request,
                   services: AppServices) -> dict[str, Any]:
    """Register a webhook; the answer holds its signing secret, shown this once."""
    limit = services.settings.webhook_max_per_user
    with services.db.session() as s:
        if body.collection_id is not None:  # every member's jobs over it: the collection's editors only
            Reach(request, s, user_id).collection(body.collection_id)
        url = _checked_url(body.url, services.settings)
        hold_user(s, user_id)  # two requests at once cannot both take the last place
        if webhook_count(s, user_id) >= limit:
            raise HTTPException(status_code=409, detail=f"you have {limit} webhooks, the most one user may have; "
                                                        "delete one before adding another")
        row = WebhookRow(user_id=user_id, url=url, events=list(body.events), description=body.description,
                         collection_id=body.collection_id, secret=new_secret(), status="active")
        s.add(row)
        s.flush()
        audit(request, s, "webhook.create", collection_id=body.collection_id, target=("webhook", row.id),
              details={"url": row.url, "events": row.events})
        return {**_out(row), "secret": row.secret}


@router.get("")
def list_webhooks(user_id: CurrentUser, services: AppServices) -> list[dict[str, Any]]:
    with services.db.session() as s:
        return [_out(r) for r in webhooks_of(s, user_id)]


@router.get("/{webhook_id}")
def read_webhook(webhook_id: uuid.UUID, user_id: CurrentUser, request: Request,
                 services: AppServices) -> dict[str, Any]:
    with services.db.session() as s:
        return _out(Reach(request, s, user_id).owned(WebhookRow, webhook_id, "webhook"))


@router.patch("/{webhook_id}")
def update_webhook(webhook_id: uuid.UUID, body: WebhookUpdate, user_id: CurrentUser,
                   request: Request, services: AppServices) -> dict[str, Any]:
    """Change the URL, events or description; ``enabled: false`` disables it, ``enabled: true`` makes it active
    again, a failing one included."""
    url = _checked_url(body.url, services.settings) if body.url is not None else None
    with services.db.session() as s:
        row = Reach(request, s, user_id).owned(WebhookRow, webhook_id, "webhook")
        if url is not None:
            row.url = url
        if body.events is not None:
            row.events = list(body.events)
        if body.description is not None:
            row.description = body.description
        if body.enabled is not None:
            row.status = "active" if body.enabled else "disabled"
            if body.enabled:
                row.failing_since = None
        s.flush()
        audit(request, s, "webhook.update", collection_id=row.collection_id, target=("webhook", row.id),
              details=body.model_dump(exclude_none=True))
        return _out(row)


@router.post("/{webhook_id}/rotate-secret")
def rotate_secret(webhook_id: uuid.UUID, user_id: CurrentUser, request: Request,
                  services: AppServices) -> dict[str, Any]:
    """A new signing secret, shown this once; every attempt from now on (retries of earlier deliveries included)
    is signed with it."""
    with services.db.session() as s:
        row = Reach(request, s, user_id).owned(WebhookRow, webhook_id, "webhook")
        row.secret = new_secret()
        s.flush()
        audit(request, s, "webhook.rotate_secret", collection_id=row.collection_id, target=("webhook", row.id))
        return {**_out(row), "secret": row.secret}


@router.delete("/{webhook_id}", status_code=204)
def delete_webhook(webhook_id: uuid.UUID, user_id: CurrentUser, request: Request, services: AppServices) -> Response:
    """The webhook and its delivery log; pending deliveries are not sent."""
    with services.db.session() as s:
        row = Reach(request, s, user_id).owned(WebhookRow, webhook_id, "webhook")
        audit(request, s, "webhook.delete", collection_id=row.collection_id, target=("webhook", row.id))
        remove_webhook(s, row)
    return Response(status_code=204)


def _delivery_out(row: WebhookDeliveryRow, attempts: list[WebhookAttemptRow]) -> dict[str, Any]:
    return {
        "id": str(row.id), "webhook_id": str(row.webhook_id), "job_id": str(row.job_id), "event": row.event,
        "webhook_message_id": row.message_id, "status": row.status, "attempt_count": row.attempts,
        "next_attempt_at": row.next_attempt_at if row.status == "pending" else None,
        "last_error": row.last_error, "created_at": row.created_at, "delivered_at": row.delivered_at,
        "attempts": [{"number": a.number, "manual": a.manual, "started_at": a.started_at,
                      "duration_ms": a.duration_ms, "status_code": a.status_code, "error": a.error}
                     for a in attempts],
    }


@router.get("/{webhook_id}/deliveries")
def list_deliveries(webhook_id: uuid.UUID, user_id: CurrentUser, request: Request, services: AppServices,
                    limit: int = Query(50, ge=1, le=500)) -> list[dict[str, Any]]:
    """The webhook's deliveries, newest first, each with every attempt (status code, time, duration, error)."""
    with services.db.session() as s:
        Reach(request, s, user_id).owned(WebhookRow, webhook_id, "webhook")
        return [_delivery_out(row, attempts) for row, attempts in deliveries_of(s, webhook_id, limit)]


@router.post("/{webhook_id}/deliveries/{delivery_id}/retry", status_code=202)
def retry_delivery(webhook_id: uuid.UUID, delivery_id: uuid.UUID, user_id: CurrentUser,
                   request: Request, services: AppServices) -> dict[str, Any]:
    """Send a delivery again now: a new attempt with the same ``webhook-id``, whatever its status; after the attempt
    under way, if one is, and within the user's attempts out at once, as every attempt."""
    with services.db.session() as s:
        Reach(request, s, user_id).owned(WebhookRow, webhook_id, "webhook")
        if delivery_of(s, webhook_id, delivery_id) is None:
            raise not_found("delivery", delivery_id)
    try:
        deliver_webhook.apply_async((str(delivery_id),), {"manual": True})
    except Exception:  # the broker is unreachable: nothing was sent, the client may try again
        log.warning("could not enqueue a retry of webhook delivery %s", delivery_id, exc_info=True)
        raise HTTPException(status_code=503, detail="the queue is unavailable; try again shortly",
                            headers={"Retry-After": "5"}) from None
    return {"delivery_id": str(delivery_id), "webhook_id": str(webhook_id), "status": "queued"}
