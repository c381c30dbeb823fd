"""Teams: users sharing collections, each member with a role (``admin``, ``editor``, ``viewer``).

The creator is the team's admin. A team's admin adds, removes and changes members; nobody changes their own role;
any member may leave; the last admin can be neither demoted nor removed (409). A non-member reads nothing of a team
(404, as for one that does not exist); a member short of ``admin`` who tries to manage members gets 403 naming it.
A member is named in the path by its user name or id. Its collections are made with ``POST /v1/collections
{"name", "team_id"}`` by an admin and listed by ``GET /v1/collections`` for every member.

Document groups (``agentsearch.pipeline.security.groups``): a team collection's document restricted to groups is found
only by their members. The team's admins put members in groups and take them out (a group is its members: made by the
first, gone with the last); a user must be a member of the team first (409). An admin sees every group with its
members; another member sees only the groups it holds, by name (who else is in them is the admins' to know). A
group is ``held`` when the caller is in it, or when its provider's groups claim at its last single sign-on names it.

Usage::

    POST   /v1/teams {"name": "support"}                      -> 201 {"id", "name", "role": "admin", "members": [...]}
    PUT    /v1/teams/{id}/members/{user} {"role": "viewer"}   -> {"user_id", "name", "role"}
    DELETE /v1/teams/{id}/members/{user}                      -> 204
    GET    /v1/teams                                          -> [{"id", "name", "role", "created_at"}]
    GET    /v1/teams/{id}                                     -> {"id", "name", "role", "members": [...],
                                                                  "groups": [...], ...}
    PUT    /v1/teams/{id}/groups/{group}/members/{user}       -> {"group", "user_id", "name"}
    DELETE /v1/teams/{id}/groups/{group}/members/{user}       -> 204
    GET    /v1/teams/{id}/groups                              -> admin: [{"name", "held", "members": [...]}]
                                                                 others: [{"name", "held": true}]
    GET    /v1/teams/{id}/audit?actor=bob&action=team.*&since=2026-11-01T00:00:00Z&limit=50
                                                              -> {"items": [...], "next_cursor": 1234 | null}
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session

from agentsearch.api.audit import actor_of
from agentsearch.api.auth import CurrentUser
from agentsearch.api.request_guard import GuardedRoute
from agentsearch.api.roles import Reach
from agentsearch.api.services import AppServices
from agentsearch.pipeline.platform.tables.teams import TeamRow
from agentsearch.pipeline.security.audit import MAX_LIMIT, events, shown
from agentsearch.pipeline.security.document_access import held_tokens, team_groups_held
from agentsearch.pipeline.security.groups import (
    GROUP_MANAGER,
    GroupMember,
    groups_of_team,
    remove_group_member,
    set_group_member,
)
from agentsearch.pipeline.security.roles import Role
from agentsearch.pipeline.security.teams import (
    Member,
    create_team,
    members_of,
    remove_member,
    set_role,
    team_collections,
    teams_of,
    user_named,
    user_names,
)
from agentsearch.pipeline.services import Services

router = APIRouter(prefix="/v1/teams", tags=["teams"], route_class=GuardedRoute)


class TeamCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100, description="Unique across the service; no '/'.")


class MemberRole(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Role = Field(description="admin: members and everything below; editor: documents, agent sets and "
                                   "webhooks of the team's collections; viewer: search and read them.")


def _member(m: Member) -> dict[str, Any]:
    return {"user_id": str(m.user_id), "name": m.name, "role": m.role}


def _groups(s, team: TeamRow, role: Role, user_id: uuid.UUID) -> list[dict[str, Any]]:
    """The team's groups as the caller may see them: an admin every group with its members, another member the
    groups it holds, names only."""
    held = set(team_groups_held(held_tokens(s, user_id), team.id))
    if role != GROUP_MANAGER:
        return [{"name": name, "held": True} for name in sorted(held)]
    return [{"name": group.name, "held": group.name in held,
             "members": [{"user_id": str(m.user_id), "name": m.name} for m in group.members]}
            for group in groups_of_team(s, team.id)]


def _team(s: Session, team: TeamRow, role: Role, user_id: uuid.UUID) -> dict[str, Any]:
    return {"id": str(team.id), "name": team.name, "role": role, "created_at": team.created_at,
            "members": [_member(m) for m in members_of(s, team.id)],
            "groups": _groups(s, team, role, user_id),
            "collections": [{"id": str(c_id), "name": name} for c_id, name in team_collections(s, team.id)]}


def _group_member(g: GroupMember) -> dict[str, Any]:
    return {"group": g.group, "user_id": str(g.user_id), "name": g.name}


def _answer(services: Services, work: Callable[[Session], Any]) -> Any:
    """``work`` in one session: its check and its change one transaction (a refusal rolls both back)."""
    with services.db.session() as s:
        return work(s)


@router.post("", status_code=201)
def create(body: TeamCreate, user_id: CurrentUser, request: Request, services: AppServices) -> dict[str, Any]:
    """A new team, its creator its admin."""
    return _answer(services, lambda s: _team(s, create_team(s, body.name, user_id, by=actor_of(request)), "admin",
                                            user_id))


@router.get("")
def list_teams(user_id: CurrentUser, services: AppServices) -> list[dict[str, Any]]:
    """The caller's teams with its role in each."""
    with services.db.session() as s:
        return [{"id": str(t.id), "name": t.name, "role": role, "created_at": t.created_at}
                for t, role in teams_of(s, user_id)]


@router.get("/{team_id}")
def read_team(team_id: uuid.UUID, user_id: CurrentUser, request: Request, services: AppServices) -> dict[str, Any]:
    """The team with its members and their roles, and its collections: for every member."""
    def read(s: Session) -> dict[str, Any]:
        team, role = Reach(request, s, user_id).team(team_id)
        return _team(s, team, role, user_id)

    return _answer(services, read)


@router.put("/{team_id}/members/{member}")
def put_member(team_id: uuid.UUID, member: str, body: MemberRole, user_id: CurrentUser,
               request: Request, services: AppServices) -> dict[str, Any]:
    """Add the user (by name or id) with the role, or change its role: the team's admins only, never one's own."""
    return _answer(services, lambda s: _member(set_role(s, team_id, user_id, member, body.role, by=actor_of(request))))


@router.delete("/{team_id}/members/{member}", status_code=204)
def delete_member(team_id: uuid.UUID, member: str, user_id: CurrentUser, request: Request,
                  services: AppServices) -> Response:
    """Remove a member (an admin), or leave the team (oneself); from its next request it reaches none of the
    team's collections, nor its jobs over them."""
    _answer(services, lambda s: remove_member(s, team_id, user_id, member, by=actor_of(request)))
    return Response(status_code=204)


@router.get("/{team_id}/groups")
def list_groups(team_id: uuid.UUID, user_id: CurrentUser, request: Request,
                services: AppServices) -> list[dict[str, Any]]:
    """The team's document groups: an admin gets every group with its members; another member the groups it
    holds, by name. ``held``: the caller finds the documents restricted to the group."""
    def read(s: Session) -> list[dict[str, Any]]:
        team, role = Reach(request, s, user_id).team(team_id)
        return _groups(s, team, role, user_id)

    return _answer(services, read)


@router.put("/{team_id}/groups/{group}/members/{member}")
def put_group_member(team_id: uuid.UUID, group: str, member: str, user_id: CurrentUser,
                     request: Request, services: AppServices) -> dict[str, Any]:
    """Put a member of the team (by name or id) in a document group, made by its first member: the team's admins
    only (403 naming ``admin`` for other members, oneself included; 409 for a user not in the team)."""
    return _answer(services, lambda s: _group_member(set_group_member(s, team_id, user_id, group, member,
                                                                     by=actor_of(request))))


@router.delete("/{team_id}/groups/{group}/members/{member}", status_code=204)
def delete_group_member(team_id: uuid.UUID, group: str, member: str, user_id: CurrentUser,
                        request: Request, services: AppServices) -> Response:
    """Take a user out of a document group (the group ends with its last member): the team's admins only; 404
    when the user is not in it."""
    _answer(services, lambda s: remove_group_member(s, team_id, user_id, group, member, by=actor_of(request)))
    return Response(status_code=204)


@router.get("/{team_id}/audit")
def read_audit(team_id: uuid.UUID, user_id: CurrentUser, request: Request, services: AppServices,
               actor: str | None = Query(None, max_length=255, description="A user's name or id."),
               action: str | None = Query(None, max_length=64, description="An action, or a family: team.*"),
               since: datetime | None = Query(None, description="Events at or after this time (ISO 8601)."),
               until: datetime | None = Query(None, description="Events before this time (ISO 8601)."),
               cursor: int | None = Query(None, ge=1, description="The previous page's next_cursor."),
               limit: int = Query(50, ge=1, le=MAX_LIMIT)) -> dict[str, Any]:
    """The team's audit trail, newest first: its membership, and every change and search over its collections.
    For the team's admins (403 naming ``admin`` for other members, 404 for anyone else)."""
    with services.db.session() as s:
        Reach(request, s, user_id).team(team_id)
        actor_id = None
        if actor is not None:
            named = user_named(s, actor)
            if named is None:  # nobody of that name: no event of theirs
                return {"items": [], "next_cursor": None}
            actor_id = named.id
        page = events(s, team_id=team_id, actor_id=actor_id, action=action, since=since, until=until,
                      before=cursor, limit=limit)
        names = user_names(s, (e.actor_id for e in page))
        return {"items": [shown(e, names) for e in page],
                "next_cursor": page[-1].id if len(page) == limit else None}
