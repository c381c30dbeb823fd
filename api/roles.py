"""The role each route needs over the collection it reaches: one table, beside the scopes of ``api.scopes``.

Every route that reaches a collection or a job (in its path, or a collection in its body) finds it through
``collection_for`` / ``job_for``, which read the role from this table for the route being served, so a route
cannot find a collection without declaring what it needs. The owner of a personal collection holds every role;
a team member holds its own (``pipeline.security.roles``); another user answers 404, a member short of the role 403
naming it. A key's scopes and collections (``api.scopes``) are checked before, on top. ``tests/unit/test_roles.py``
walks the app's routes and fails for a route reaching a collection or job without an entry.

Usage::

    collection = collection_for(request, s, collection_id, user_id, lock=True)   # the route's role, or 404 / 403
    job = job_for(request, s, job_id, user_id)
    ROUTE_ROLES[("POST", "/v1/collections/{collection_id}/documents")]          # "editor"
"""

from __future__ import annotations

import uuid

from fastapi import Request
from sqlalchemy.orm import Session

from api.errors import http_error
from api.scopes import COLLECTION, JOB, TEAM, template
from pipeline.job.refusal import Refusal
from pipeline.platform.db import Collection, Job, Team
from pipeline.security.access import Access
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
    # The team in the path: who did what in it is for its admins.
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


def collection_for(request: Request, s: Session, collection_id: uuid.UUID, user_id: uuid.UUID,
                   lock: bool = False) -> Collection:
    """The collection with the role the route needs, or the HTTP error: 404 not reached, 403 naming the role."""
    try:
        return Access(s, user_id).collection(collection_id, role_needed(request), lock=lock, what=_action(request))
    except Refusal as exc:
        raise http_error(exc) from None


def team_for(request: Request, s: Session, team_id: uuid.UUID, user_id: uuid.UUID) -> Team:
    """The team (named in a body, or the path) with the role the route needs in it, or 404 / 403."""
    try:
        return Access(s, user_id).team(team_id, role_needed(request), what=_action(request))[0]
    except Refusal as exc:
        raise http_error(exc) from None


def job_for(request: Request, s: Session, job_id: uuid.UUID, user_id: uuid.UUID) -> Job:
    """The job when the caller sees it, with the role the route needs for another member's job."""
    try:
        return Access(s, user_id).job(job_id, role_needed(request), what=_action(request))
    except Refusal as exc:
        raise http_error(exc) from None
