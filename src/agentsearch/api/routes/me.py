"""``GET /v1/me``: who the key belongs to, the limits in force for it, and how much of them is used.

Usage::

    curl -H "Authorization: Bearer $KEY" http://127.0.0.1:8000/v1/me
    # {"user": {"id": ..., "name": "alice"}, "limits": {"searches_per_minute": 60, ...},
    #  "key": {"prefix": "as_XXXXXXXX", "label": "ci", "scopes": ["search"], "collections": null, "expires_at": ...},
    #  "usage": {"searches": {"limit": 60, "used": 3, "remaining": 57, "reset_s": 41}, ...,
    #            "running_jobs": 1, "documents": 120}}
"""

from __future__ import annotations

import uuid
from datetime import datetime

from fastapi import APIRouter, Request
from pydantic import BaseModel

from agentsearch.api.auth import CurrentUser, key_grant
from agentsearch.api.rate_limits import effective_limits
from agentsearch.api.request_guard import GuardedRoute
from agentsearch.api.services import AppServices
from agentsearch.api.session_auth import csrf_token
from agentsearch.pipeline.security.quotas import Limits, QuotaStore, RouteClass
from agentsearch.pipeline.security.rate_windows import RateWindows
from agentsearch.pipeline.security.users import UserStore

router = APIRouter(tags=["me"], route_class=GuardedRoute)


class UserOut(BaseModel):
    id: uuid.UUID
    name: str


class KeyOut(BaseModel):
    """The key of this request and its limits; null is no limit (every scope, every collection, no expiry)."""

    prefix: str
    label: str
    scopes: list[str] | None
    collections: list[uuid.UUID] | None
    expires_at: datetime | None


class WindowUsage(BaseModel):
    limit: int
    used: int
    remaining: int
    reset_s: int  # seconds until the oldest request counted leaves the minute


class Usage(BaseModel):
    # None while the counters' Redis cannot be reached (requests then pass unlimited).
    searches: WindowUsage | None
    ingest: WindowUsage | None
    reads: WindowUsage | None
    running_jobs: int
    documents: int


class MeOut(BaseModel):
    user: UserOut
    key: KeyOut
    limits: Limits
    usage: Usage
    counters_shared: bool  # True: counted in Redis across every API process; False: in this process alone
    # Signed in through single sign-on: what a change made with the session cookie sends in X-CSRF-Token.
    csrf_token: str | None = None


def _window(windows: RateWindows, user_id: uuid.UUID, kind: RouteClass, limit: int) -> WindowUsage | None:
    window = windows.peek(user_id, kind, limit)
    if window is None:
        return None
    return WindowUsage(limit=limit, used=limit - window.remaining, remaining=window.remaining,
                       reset_s=round(window.reset_s))


@router.get("/v1/me", response_model=MeOut)
def read_me(user_id: CurrentUser, request: Request, services: AppServices) -> MeOut:
    """The caller, its limits (the defaults overlaid by an operator's values for it) and its usage now; this
    request is among the reads counted."""
    limits = effective_limits(request, user_id)
    quotas = QuotaStore(services.db)
    name = UserStore(services.db).name_of(user_id)
    windows: RateWindows = request.app.state.rate_windows
    grant = key_grant(request)
    assert grant is not None  # CurrentUser set it, for a key and a console session alike
    return MeOut(
        user=UserOut(id=user_id, name=name or ""),
        key=KeyOut(prefix=grant.prefix, label=grant.label, **grant.limits.shown()),
        limits=limits,
        usage=Usage(
            searches=_window(windows, user_id, "search", limits.searches_per_minute),
            ingest=_window(windows, user_id, "ingest", limits.ingest_per_minute),
            reads=_window(windows, user_id, "read", limits.reads_per_minute),
            running_jobs=quotas.running_jobs(user_id),
            documents=quotas.documents_stored(user_id),
        ),
        counters_shared=windows.shared,
        csrf_token=csrf_token(request),
    )
