"""A user's own API keys: make one (limited or not), list them, revoke one.

Only a key without limits manages keys (``agentsearch.api.scopes``): a limited key can neither make a broader key nor
one that outlives it. A new key is shown once, in the answer to ``POST``; listings show its prefix, never the key.
Another user's prefix answers 404 like one that does not exist.

Usage::

    POST   /v1/keys {"label": "ci", "scopes": ["search", "read"], "collections": [id], "expires_in_days": 30}
           -> 201 {"key": "as_...", "prefix": "as_XXXXXXXX", "scopes": [...], "expires_at": ..., ...}
    GET    /v1/keys                 -> [{"prefix", "label", "scopes", "collections", "expires_at", "created_at", ...}]
    DELETE /v1/keys/{prefix}        -> 204
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from agentsearch.api.audit import audit
from agentsearch.api.auth import CurrentUser
from agentsearch.api.errors import not_found, unprocessable
from agentsearch.api.request_guard import GuardedRoute
from agentsearch.api.services import AppServices
from agentsearch.pipeline.security.access import Access
from agentsearch.pipeline.security.key_limits import MAX_EXPIRY, KeyLimitError, KeyLimits, Scope
from agentsearch.pipeline.security.users import SHOWN_CHARS, KeyInfo, UserStore
from agentsearch.pipeline.services import Services

router = APIRouter(prefix="/v1/keys", tags=["keys"], route_class=GuardedRoute)


class KeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: str = Field("", max_length=255, description="What the key is for, for its owner's lists.")
    scopes: list[Scope] | None = Field(None, max_length=3, description="What the key may do; null: everything.")
    collections: list[uuid.UUID] | None = Field(
        None, max_length=100, description="The only collections the key sees (ids of the caller's); null: all.")
    expires_in_days: StrictInt | None = Field(None, gt=0, le=MAX_EXPIRY.days,
                                              description="Days until the key stops working; null: never.")


def shown(info: KeyInfo, current_prefix: str | None = None) -> dict[str, Any]:
    return {"prefix": info.prefix, "label": info.label, **info.limits.shown(), "created_at": info.created_at,
            "revoked_at": info.revoked_at, "current": info.prefix == current_prefix}


def _checked_limits(body: KeyCreate, services: Services, user_id: uuid.UUID) -> KeyLimits:
    """The limits asked for; 422 naming the field for no scope or a collection the caller does not have."""
    if body.collections is not None:
        with services.db.session() as s:
            owned = Access(s, user_id).reached_ids(body.collections)
        for i, collection_id in enumerate(body.collections):
            if collection_id not in owned:
                raise unprocessable(("body", "collections", i), f"collection {collection_id} not found")
    expires_in = timedelta(days=body.expires_in_days) if body.expires_in_days is not None else None
    try:
        return KeyLimits.of(body.scopes, body.collections, expires_in)
    except KeyLimitError as exc:
        raise unprocessable(("body", "scopes"), str(exc)) from None


@router.post("", status_code=201)
def create_key(body: KeyCreate, user_id: CurrentUser, request: Request, services: AppServices) -> dict[str, Any]:
    """A new key of the caller's, with the limits given; the answer holds the key, shown this once."""
    limits = _checked_limits(body, services, user_id)
    store = UserStore(services.db)
    key = store.issue_key_for(user_id, body.label, limits)
    created = next(k for k in store.keys_of(user_id) if k.prefix == key[:SHOWN_CHARS])
    _audited(request, services, "key.create", created.prefix, {"label": created.label, **created.limits.shown()})
    return {"key": key, **shown(created)}


@router.get("")
def list_keys(user_id: CurrentUser, request: Request, services: AppServices) -> list[dict[str, Any]]:
    """The caller's keys, revoked ones included, oldest first; ``current`` marks the one this request used."""
    current = (getattr(request.state, "api_key", None) or "")[:SHOWN_CHARS]
    return [shown(k, current) for k in UserStore(services.db).keys_of(user_id)]


@router.delete("/{prefix}", status_code=204)
def revoke_key(prefix: str, user_id: CurrentUser, request: Request, services: AppServices) -> Response:
    """Revoke the caller's key of this prefix (as listed): it stops working at once in every API process."""
    if len(prefix) != SHOWN_CHARS or not UserStore(services.db).revoke_own(user_id, prefix):
        raise not_found("key", prefix)
    _audited(request, services, "key.revoke", prefix, {})
    return Response(status_code=204)


def _audited(request: Request, services: Services, action: str, prefix: str, details: dict[str, Any]) -> None:
    # Its own transaction, right after the key's (the user store commits its own): an audit row that cannot be
    # written answers 500, so the change is never reported done without its record.
    with services.db.session() as s:
        audit(request, s, action, target=("key", prefix), details=details)
