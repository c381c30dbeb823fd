"""The audit trail: every change and every search, recorded with who, when, what and from which key.

``record`` adds one row (one INSERT) to the caller's session, so an event commits or rolls back with the change it
describes; a failing INSERT fails the request, never leaving a change unrecorded. A row names its team when the
event is the team's (membership) or over a team collection: the team's id is read inside the same INSERT. Rows are
append-only for the service (migration 0017's trigger); retention prunes them (``retention_audit_days``).

Actions: ``team.create``, ``team.member.set``, ``team.member.remove``, ``team.group.member.set``,
``team.group.member.remove``, ``key.create``, ``key.revoke``, ``user.create``, ``user.limits`` (the operator's command
line), ``session.sign_in`` (a console sign-in at the identity provider),
``collection.create``, ``collection.update``, ``document.add``, ``document.upload``, ``document.delete``,
``agent_config.create``, ``collection.agents.set``, ``webhook.create``, ``webhook.update``, ``webhook.rotate_secret``,
``webhook.delete``, ``tool.add``, ``tool.remove``, ``search``.

Usage::

    with db.session() as s:
        record(s, Actor(user_id, "as_XXXXXXXX"), "document.add", collection_id=c.id, target=("document", "leave"))
        record_reads(s, actor, "search", [mine.id, team_collection.id], target=("job", job_id))  # a row each
        page = events(s, team_id=team.id, action="team.*", since=yesterday, limit=50)   # newest first
        events(s, team_id=team.id, before=page[-1].id)                                  # the next page
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ScalarSelect, insert, select
from sqlalchemy.orm import Session

from agentsearch.pipeline.platform.db import utcnow
from agentsearch.pipeline.platform.tables.audit import AuditEventRow
from agentsearch.pipeline.platform.tables.collections import CollectionRow

MAX_LIMIT = 200
# Details are a few words of what changed, never a document or a secret: each string cut to this many characters.
DETAIL_CHARS = 200
# The key prefix an operator's change (the command line on the database) is recorded with.
OPERATOR = "operator"


@dataclass(frozen=True)
class Actor:
    """Who acts: a user (None: the operator) and its key's prefix, ``session`` for the console signed in by SSO."""

    user_id: uuid.UUID | None
    key_prefix: str = OPERATOR
    request_id: str | None = None
    ip: str | None = None


def _small(details: dict[str, Any]) -> dict[str, Any]:
    plain = json.loads(json.dumps(details, default=str))  # times and ids as text: a JSON column takes no others
    return {k: v[:DETAIL_CHARS] if isinstance(v, str) else v for k, v in plain.items()}


def record(s: Session, actor: Actor, action: str, *, team_id: uuid.UUID | None = None,
           collection_id: uuid.UUID | None = None, target: tuple[str, Any] = ("", ""),
           details: dict[str, Any] | None = None) -> None:
    """One audit row in the caller's transaction (one INSERT; a collection's team read inside it)."""
    team: uuid.UUID | ScalarSelect[uuid.UUID | None] | None = team_id
    if team is None and collection_id is not None:
        team = select(CollectionRow.team_id).where(CollectionRow.id == collection_id).scalar_subquery()
    s.execute(insert(AuditEventRow).values(
        at=utcnow(), actor_id=actor.user_id, key_prefix=actor.key_prefix[:16], team_id=team,
        collection_id=collection_id, action=action, target_type=target[0], target_id=str(target[1])[:512],
        details=_small(details or {}), request_id=actor.request_id, ip=actor.ip))


def record_reads(s: Session, actor: Actor, action: str, collections: Iterable[uuid.UUID], *,
                 target: tuple[str, Any] = ("", ""), details: dict[str, Any] | None = None) -> None:
    """One row per collection read (each once, in the order given), each in its own team's trail: a search over a
    member's own collection and a team's is the team's to see as much as one over the team's alone."""
    for collection_id in dict.fromkeys(collections):
        record(s, actor, action, collection_id=collection_id, target=target, details=details)


def events(s: Session, *, team_id: uuid.UUID | None = None, actor_id: uuid.UUID | None = None,
           action: str | None = None, since: datetime | None = None, until: datetime | None = None,
           before: int | None = None, limit: int = 50) -> list[AuditEventRow]:
    """Events newest first (by id), filtered; ``before`` an id: the page after the one that ended there.

    ``action`` is one action, or a family ending in ``.*`` (``team.*``: every team event)."""
    query = select(AuditEventRow).order_by(AuditEventRow.id.desc()).limit(min(max(limit, 1), MAX_LIMIT))
    if team_id is not None:
        query = query.where(AuditEventRow.team_id == team_id)
    if actor_id is not None:
        query = query.where(AuditEventRow.actor_id == actor_id)
    if action:
        query = query.where(AuditEventRow.action.startswith(action[:-1], autoescape=True) if action.endswith(".*")
                            else AuditEventRow.action == action)
    if since is not None:
        query = query.where(AuditEventRow.at >= since)
    if until is not None:
        query = query.where(AuditEventRow.at < until)
    if before is not None:
        query = query.where(AuditEventRow.id < before)
    return list(s.scalars(query))


def shown(event: AuditEventRow, names: dict[uuid.UUID, str] | None = None) -> dict[str, Any]:
    """An event as the API and the command line give it (``names``: user names by id, for ``actor``)."""
    return {"id": event.id, "at": event.at.isoformat(), "actor_id": str(event.actor_id) if event.actor_id else None,
            "actor": (names or {}).get(event.actor_id) if event.actor_id else OPERATOR,
            "key_prefix": event.key_prefix, "action": event.action,
            "team_id": str(event.team_id) if event.team_id else None,
            "collection_id": str(event.collection_id) if event.collection_id else None,
            "target_type": event.target_type, "target_id": event.target_id, "details": event.details,
            "request_id": event.request_id, "ip": event.ip}
