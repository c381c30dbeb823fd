"""The role each route needs over what it reaches, and ``Reach``: the one way a route finds a thing of its caller's.

Every route that reaches a collection, a job or a team (in its path, or a collection in its body) finds it through
``Reach``, which reads the role from this table for the route being served, so a route cannot find a collection
without declaring what it needs. The owner of a personal collection holds every role; a team member holds its own
(``pipeline.security.roles``); another user answers 404, a member short of the role 403 naming it. A user's personal
things (webhooks, profile sets, conversations, agent configs) are found by ``Reach.owned``: another user's answers
404 in the words of a missing one. The rules themselves are ``pipeline.security.access``; this turns their refusals
into the HTTP answer. A key's scopes and collections (``api.scopes``) are checked before, on top.
``tests/unit/api/test_roles.py`` walks the app's routes and fails for a route reaching a collection or job without an
entry.

Usage::

    with services.db.session() as s:
        reach = Reach(request, s, user_id)
        collection = reach.collection(collection_id, lock=True)      # the route's role, or 404 / 403
        job = reach.job(job_id)
        team, role = reach.team(team_id)
        webhook = reach.owned(WebhookRow, webhook_id, "webhook")      # the caller's own, or 404
    ROUTE_ROLES[("POST", "/v1/collections/{collection_id}/documents")]     # "editor"
"""

from __future__ import annotations

import uuid

from fastapi import Request
from sqlalchemy.orm import Session

from api.errors import http_error
from api.scopes import COLLECTION, JOB, TEAM, template
from pipeline.platform.db import Collection, Job, Team
from pipeline.refusal import Refusal
from pipeline.security.access import Access, Owned
from pipeline.security.groups import GROUP_MANAGER
from pipeline.security.roles import Role

ROUTE_ROLES: dict[tuple[str, str], Role] = {
    ("GET", COLLECTION): "viewer",
    ("PATCH", COLLECTION): "editor",
    ("POST", f"{COLLECTION}/documents"): "editor",
    ("GET", f"{COLLECTION}/documents"): "viewer",
    ("GET", f"{COLLECTION}/documents/{{document_id}}"): "viewer",
    ("DELETE", f"{COLLECTION}/documents/{{document_id}}"): "editor",
    ("POST", f"{COLLECTION}/files"): "editor",
    ("GET", f"{COLLECTION}/agents"): "viewer",
    ("PUT", f"{COLLECTION}/agents"): "editor",
    # The collections named in the body.
    ("POST", "/v1/collections"): "admin",  # a team collection: adding one to the team is its admin's
    ("POST", "/v1/search"): "viewer",
    ("POST", "/v1/webhooks"): "editor",  # a webhook of a collection hears of every member's jobs over it
    ("POST", "/v1/profile-sets"): "viewer",
    # Another member's job; the submitter's own needs only to be seen (``Access.job``).
    ("GET", JOB): "viewer",
    ("DELETE", JOB): "editor",
    ("GET", f"{JOB}/events"): "viewer",
    ("GET", f"{JOB}/artifacts/{{filename}}"): "viewer",
    # The team in the path: every member reads it; who did what in it is for its admins.
    ("GET", TEAM): "viewer",
    ("GET", f"{TEAM}/audit"): "admin",
    # Its document groups: every member reads those it holds (an admin all, with their members); who is in one is
    # changed by ``pipeline.security.groups`` alone, which holds the operator's command to the same rule.
    ("GET", f"{TEAM}/groups"): "viewer",
    ("PUT", f"{TEAM}/groups/{{group}}/members/{{member}}"): GROUP_MANAGER,
    ("DELETE", f"{TEAM}/groups/{{group}}/members/{{member}}"): GROUP_MANAGER,
}


def role_needed(request: Request) -> Role:
    route = request.scope.get("route")
    path = template(getattr(route, "path", request.url.path))
    role = ROUTE_ROLES.get((request.method.upper(), path))
    if role is None:  # fail closed: a route missing from the table reaches only what its caller owns
        return "admin"
    return role


def _action(request: Request) -> str:
    route = request.scope.get("route")
    return f"{request.method} {template(getattr(route, 'path', request.url.path))}"


class Reach:
    """What the request's caller reaches, in the request's session, with the role its route needs."""

    def __init__(self, request: Request, s: Session, user_id: uuid.UUID) -> None:
        self.request = request
        self.access = Access(s, user_id)

    def collection(self, collection_id: uuid.UUID, lock: bool = False) -> Collection:
        """The collection (in the path, or named in a body), or 404 not reached, 403 naming the role. ``lock`` holds
        its row until the transaction ends."""
        try:
            return self.access.collection(collection_id, role_needed(self.request), lock=lock,
                                          what=_action(self.request))
        except Refusal as exc:
            raise http_error(exc) from None

    def team(self, team_id: uuid.UUID) -> tuple[Team, Role]:
        """The team (named in a body, or the path) and the caller's role in it, when that covers the route's."""
        try:
            return self.access.team(team_id, role_needed(self.request), what=_action(self.request))
        except Refusal as exc:
            raise http_error(exc) from None

    def job(self, job_id: uuid.UUID) -> Job:
        """The job when the caller sees it, with the role the route needs for another member's job."""
        try:
            return self.access.job(job_id, role_needed(self.request), what=_action(self.request))
        except Refusal as exc:
            raise http_error(exc) from None

    def seen_job(self, job_id: uuid.UUID) -> Job | None:
        """The job while the caller sees it, else None: for asking again (a stream while it runs, a wait at its
        end), where not seeing it ends what was under way rather than answer 404."""
        try:
            return self.access.job(job_id)
        except Refusal:
            return None

    def owned(self, row_type: type[Owned], ident: uuid.UUID, what: str, lock: bool = False) -> Owned:
        """The caller's own personal thing of this id; another user's answers 404 as a missing one."""
        try:
            return self.access.owned(row_type, ident, what, lock=lock)
        except Refusal as exc:
            raise http_error(exc) from None
