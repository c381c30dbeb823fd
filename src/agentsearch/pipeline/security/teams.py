"""Teams and their members: made, listed, and members added, given a role, or removed, by the rules of
``agentsearch.pipeline.security.roles``.

A team's name is unique across the service (a team collection is named ``team/collection`` where a name alone would
be ambiguous). A member is named by its user name or id. The creator is the team's first admin. The functions take
the caller's session, so a check and its change are one transaction; a change of membership locks the team's row,
so two admins demoting each other at once cannot leave the team without one. ``actor`` None is the operator (the
CLI on the database), who may manage any team but is held to the last-admin rule like anyone. Each change is
recorded in the audit trail in its transaction (``agentsearch.pipeline.security.audit``), as ``by`` (default: the actor
with no key, the operator when None).

Usage::

    with db.session() as s:
        team = create_team(s, "support", creator_id)
        set_role(s, team.id, actor=creator_id, member="bob", role="viewer")     # Refusal 403 / 404 / 409, or None
        members_of(s, team.id)                                                  # [Member(user_id, name, role)]
        team_collections(s, team.id)                                            # [(id, name)], by name
        remove_member(s, team.id, actor=creator_id, member="bob")
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from sqlalchemy import delete, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.teams import TeamGroupMemberRow, TeamMemberRow, TeamRow
from agentsearch.pipeline.platform.tables.users import UserRow
from agentsearch.pipeline.refusal import Refusal, invalid, missing
from agentsearch.pipeline.security.access import Access
from agentsearch.pipeline.security.audit import OPERATOR, Actor, record
from agentsearch.pipeline.security.key_limits import uuid_or_none
from agentsearch.pipeline.security.roles import Role, change_problem

TEAM_NAME = re.compile(r"^[\w][\w .-]{0,99}$")


@dataclass(frozen=True)
class Member:
    user_id: uuid.UUID
    name: str
    role: Role


def recorded_as(actor: uuid.UUID | None, by: Actor | None) -> Actor:
    """Who a change is recorded as: ``by`` when given, else the actor with no key, the operator when None."""
    return by if by is not None else Actor(actor, OPERATOR if actor is None else "")


def create_team(s: Session, name: str, creator_id: uuid.UUID, by: Actor | None = None) -> TeamRow:
    """A new team with its creator as admin; 422 for a malformed name, 409 for a taken one."""
    if not TEAM_NAME.match(name):
        raise invalid(("body", "name"), f"invalid team name {name!r}: 1-100 characters, letters, digits, spaces "
                                        "and . _ -, starting with a letter or digit")
    team = TeamRow(name=name, created_by=creator_id)
    try:
        with s.begin_nested():
            s.add(team)
            s.flush()
    except IntegrityError:
        raise Refusal(409, f"a team named {name!r} already exists") from None
    s.add(TeamMemberRow(team_id=team.id, user_id=creator_id, role="admin"))
    s.flush()
    record(s, recorded_as(None, by), "team.create", team_id=team.id, target=("team", team.id),
           details={"name": name, "admin": str(creator_id)})
    return team


def team_named(s: Session, ident: str) -> TeamRow | None:
    """A team by its id or its name."""
    team_id = uuid_or_none(ident)
    return s.get(TeamRow, team_id) if team_id is not None else s.scalar(select(TeamRow).where(TeamRow.name == ident))


def user_named(s: Session, ident: str | uuid.UUID) -> UserRow | None:
    """A user by its id or its name."""
    user_id = uuid_or_none(ident)
    return s.scalar(select(UserRow).where(or_(UserRow.name == str(ident), UserRow.id == user_id) if user_id is not None
                                       else UserRow.name == str(ident)))


def user_names(s: Session, user_ids: Iterable[uuid.UUID | None]) -> dict[uuid.UUID, str]:
    """The names of these users, by id (an id of no user is left out)."""
    return dict(s.execute(select(UserRow.id, UserRow.name).where(UserRow.id.in_(set(user_ids)))).tuples().all())


def team_name(s: Session, team_id: uuid.UUID) -> str | None:
    team = s.get(TeamRow, team_id)
    return team.name if team is not None else None


def team_collections(s: Session, team_id: uuid.UUID) -> list[tuple[uuid.UUID, str]]:
    """The team's collections, ``(id, name)`` by name."""
    return list(s.execute(select(CollectionRow.id, CollectionRow.name).where(CollectionRow.team_id == team_id)
                          .order_by(CollectionRow.name)).tuples().all())


def members_of(s: Session, team_id: uuid.UUID) -> list[Member]:
    rows = s.execute(select(TeamMemberRow.user_id, UserRow.name, TeamMemberRow.role)
                     .join(UserRow, UserRow.id == TeamMemberRow.user_id)
                     .where(TeamMemberRow.team_id == team_id).order_by(UserRow.name)).all()
    return [Member(user_id, name, cast(Role, role)) for user_id, name, role in rows]


def teams_of(s: Session, user_id: uuid.UUID) -> list[tuple[TeamRow, Role]]:
    rows = s.execute(select(TeamRow, TeamMemberRow.role).join(TeamMemberRow, TeamMemberRow.team_id == TeamRow.id)
                     .where(TeamMemberRow.user_id == user_id).order_by(TeamRow.name)).all()
    return [(team, cast(Role, role)) for team, role in rows]


def _change(s: Session, team_id: uuid.UUID, actor: uuid.UUID | None, member: str | uuid.UUID,
            role: Role | None) -> tuple[UserRow, TeamMemberRow | None]:
    """The member's user and row, once the change is allowed (the team's row locked meanwhile)."""
    team = s.get(TeamRow, team_id, with_for_update=True)
    if team is None:
        raise missing("team", team_id)
    if actor is None:  # the operator: any team, within the last-admin rule
        actor_role: Role | None = "admin"
        actor = uuid.UUID(int=0)
    else:
        actor_role = Access(s, actor).role_in(team_id)
    if actor_role is None:  # a non-member learns nothing of the team, nor of who is in it
        raise missing("team", team_id)
    user = user_named(s, member)
    if user is None:
        raise missing("user", member)
    row = s.get(TeamMemberRow, (team_id, user.id))
    admins = s.scalar(select(func.count()).select_from(TeamMemberRow)
                      .where(TeamMemberRow.team_id == team_id, TeamMemberRow.role == "admin")) or 0
    held = cast(Role, row.role) if row is not None else None
    problem = change_problem(actor, actor_role, user.id, held, role, admins)
    if problem is not None:
        raise problem
    return user, row


def set_role(s: Session, team_id: uuid.UUID, actor: uuid.UUID | None, member: str | uuid.UUID,
             role: Role, by: Actor | None = None) -> Member:
    """Add the user to the team with ``role``, or give a member that role."""
    user, row = _change(s, team_id, actor, member, role)
    if row is None:
        s.add(TeamMemberRow(team_id=team_id, user_id=user.id, role=role))
    else:
        row.role = role
    s.flush()
    record(s, recorded_as(actor, by), "team.member.set", team_id=team_id, target=("user", user.id),
           details={"name": user.name, "role": role})
    return Member(user.id, user.name, role)


def remove_member(s: Session, team_id: uuid.UUID, actor: uuid.UUID | None, member: str | uuid.UUID,
                  by: Actor | None = None) -> Member:
    """Take the user out of the team, and out of its document groups: from the next request on it reaches none of
    the team's collections."""
    user, row = _change(s, team_id, actor, member, None)
    assert row is not None  # change_problem refuses a user who is not a member
    # Its document groups go with it: added back later, it starts in none of them.
    groups = list(s.scalars(delete(TeamGroupMemberRow).where(TeamGroupMemberRow.team_id == team_id,
                                                          TeamGroupMemberRow.user_id == user.id)
                            .returning(TeamGroupMemberRow.name)))
    s.delete(row)
    s.flush()
    details = {"name": user.name, "role": row.role, **({"groups": sorted(groups)} if groups else {})}
    record(s, recorded_as(actor, by), "team.member.remove", team_id=team_id, target=("user", user.id),
           details=details)
    return Member(user.id, user.name, cast(Role, row.role))
