"""``Reach``: the one way a route finds a thing of its caller's, with the role its route needs there.

Every route that reaches a collection, a job or a team (in its path, or a collection in its body) finds it through
``Reach``, which reads the role from the route table (``agentsearch.api.route_rules``, each route's scope and role
declared once) for the route being served, so a route cannot find a collection without declaring what it needs. The
owner of a personal collection holds every role; a team member holds its own (``agentsearch.pipeline.security.roles``);
another user answers 404, a member short of the role 403 naming it. A user's personal things (webhooks, profile sets,
conversations, agent configs) are found by ``Reach.owned``: another user's answers 404 in the words of a missing one.
The rules themselves are ``agentsearch.pipeline.security.access``; their refusals reach the client through the API's one
handler (``agentsearch.api.errors.refusal_answer``). A key's scopes and collections (``agentsearch.api.scopes``) are
checked before, on top.

Usage::

    with services.db.session() as s:
        reach = Reach(request, s, user_id)
        collection = reach.collection(collection_id, lock=True)      # the route's role, or 404 / 403
        job = reach.job(job_id)
        team, role = reach.team(team_id)
        webhook = reach.owned(WebhookRow, webhook_id, "webhook")      # the caller's own, or 404
"""

from __future__ import annotations

import uuid

from fastapi import Request
from sqlalchemy.orm import Session

from agentsearch.api.route_rules import rule_of, template
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.platform.tables.teams import TeamRow
from agentsearch.pipeline.refusal import Refusal
from agentsearch.pipeline.security.access import Access, Owned
from agentsearch.pipeline.security.roles import Role


def role_needed(request: Request) -> Role:
    route = request.scope.get("route")
    rule = rule_of(request.method, getattr(route, "path", request.url.path))
    if rule is None or rule.role is None:  # fail closed: a route without a role reaches only what its caller owns
        return "admin"
    return rule.role


def _action(request: Request) -> str:
    route = request.scope.get("route")
    return f"{request.method} {template(getattr(route, 'path', request.url.path))}"


class Reach:
    """What the request's caller reaches, in the request's session, with the role its route needs."""

    def __init__(self, request: Request, s: Session, user_id: uuid.UUID) -> None:
        self.request = request
        self.access = Access(s, user_id)

    def collection(self, collection_id: uuid.UUID, lock: bool = False) -> CollectionRow:
        """The collection (in the path, or named in a body), or 404 not reached, 403 naming the role. ``lock`` holds
        its row until the transaction ends."""
        return self.access.collection(collection_id, role_needed(self.request), lock=lock, what=_action(self.request))

    def team(self, team_id: uuid.UUID) -> tuple[TeamRow, Role]:
        """The team (named in a body, or the path) and the caller's role in it, when that covers the route's."""
        return self.access.team(team_id, role_needed(self.request), what=_action(self.request))

    def job(self, job_id: uuid.UUID) -> JobRow:
        """The job when the caller sees it, with the role the route needs for another member's job."""
        return self.access.job(job_id, role_needed(self.request), what=_action(self.request))

    def seen_job(self, job_id: uuid.UUID) -> JobRow | None:
        """The job while the caller sees it, else None: for asking again (a stream while it runs, a wait at its
        end), where not seeing it ends what was under way rather than answer 404."""
        try:
            return self.access.job(job_id)
        except Refusal:
            return None

    def owned(self, row_type: type[Owned], ident: uuid.UUID, what: str, lock: bool = False) -> Owned:
        """The caller's own personal thing of this id; another user's answers 404 as a missing one."""
        return self.access.owned(row_type, ident, what, lock=lock)
