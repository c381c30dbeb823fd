"""Audit rows from a route: the caller as the request shows it (user, key prefix or ``session``, request id, IP).

A route calls ``audit`` in the session of its change, after the change, so both commit together
(``agentsearch.pipeline.security.audit``).

Usage::

    with services.db.session() as s:
        ...                                                               # the change
        audit(request, s, "webhook.delete", target=("webhook", webhook_id))
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from fastapi import Request
from sqlalchemy.orm import Session

from agentsearch.api.auth import key_grant
from agentsearch.api.session_auth import SESSION_STATE
from agentsearch.pipeline.security.audit import Actor, record, record_reads

REQUEST_ID_HEADER = "x-request-id"


def actor_of(request: Request) -> Actor:
    grant = key_grant(request)
    prefix = "session" if getattr(request.state, SESSION_STATE, None) else (grant.prefix if grant else "")
    return Actor(grant.user_id if grant else None, prefix,
                 (request.headers.get(REQUEST_ID_HEADER) or "")[:64] or None,
                 request.client.host if request.client else None)


def audit(request: Request, s: Session, action: str, *, team_id: uuid.UUID | None = None,
          collection_id: uuid.UUID | None = None, target: tuple[str, Any] = ("", ""),
          details: dict[str, Any] | None = None) -> None:
    record(s, actor_of(request), action, team_id=team_id, collection_id=collection_id, target=target,
           details=details)


def audit_reads(request: Request, s: Session, action: str, collections: Iterable[uuid.UUID], *,
                target: tuple[str, Any] = ("", ""), details: dict[str, Any] | None = None) -> None:
    """One row per collection read, each in its own team's trail
    (``agentsearch.pipeline.security.audit.record_reads``)."""
    record_reads(s, actor_of(request), action, collections, target=target, details=details)
