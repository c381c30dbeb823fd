"""A team's document groups: who is in which, changed by the team's admins only.

A document of a team collection restricted to groups (``access: {"groups": [...]}``) is found only by the members
of one of them (``agentsearch.pipeline.security.document_access``). A group is its members: the first member put in it
makes it, taking out the last ends it, and there is nothing else to create or name. A group opens documents the rest of
the team does not find, so who is in one is the admins' to decide, as a role is: a member short of ``admin`` gets
403 naming it, even for itself (nobody puts itself in a group but an admin). Only a member of the team can be in
its groups (409 otherwise), and it leaves them all when it leaves the team (``teams.remove_member``), so a user
taken out and added back starts with none.

The functions take the caller's session, so a check and its change are one transaction; a change locks the team's
row, as a change of membership does, so a member cannot be put in a group while it is being removed from the team.
``actor`` None is the operator (the CLI on the database), who may manage any team's groups. Each change is recorded
in the audit trail in its transaction (``team.group.member.set``, ``team.group.member.remove``; target the user,
details the group and the user's name); putting a user in a group it is already in changes nothing and records
nothing.

Usage::

    with db.session() as s:
        set_group_member(s, team.id, actor=admin_id, group="hr", member="bob")   # GroupMember, or Refusal
        groups_of_team(s, team.id)                          # [Group(name="hr", members=[Member(user_id, name, role)])]
        remove_group_member(s, team.id, actor=admin_id, group="hr", member="bob")   # 404 when bob is not in hr
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import NamedTuple, cast

from sqlalchemy import select
from sqlalchemy.orm import Session

from agentsearch.pipeline.platform.tables.teams import TeamGroupMemberRow, TeamMemberRow, TeamRow
from agentsearch.pipeline.platform.tables.users import UserRow
from agentsearch.pipeline.refusal import Refusal, invalid, missing
from agentsearch.pipeline.security.access import Access
from agentsearch.pipeline.security.audit import Actor, record
from agentsearch.pipeline.security.document_access import GROUP_NAME
from agentsearch.pipeline.security.roles import Role
from agentsearch.pipeline.security.teams import Member, recorded_as, user_named

# The role that changes who is in a team's groups (``agentsearch.api.route_rules`` declares it for the routes).
GROUP_MANAGER: Role = "admin"


@dataclass(frozen=True)
class GroupMember:
    group: str
    user_id: uuid.UUID
    name: str


class Group(NamedTuple):
    name: str
    members: list[Member]


def _managed(s: Session, team_id: uuid.UUID, actor: uuid.UUID | None, group: str,
             member: str | uuid.UUID) -> tuple[TeamRow, UserRow]:
    """The team (its row locked) and the user named, once the actor may change the team's groups."""
    if actor is not None:  # a non-member learns nothing of the team, nor of its groups (404); a member not admin, 403
        team, _ = Access(s, actor).team(team_id, GROUP_MANAGER, "managing the team's document groups", lock=True)
    elif (operated := s.get(TeamRow, team_id, with_for_update=True)) is not None:  # the operator: any team
        team = operated
    else:
        raise missing("team", team_id)
    if not GROUP_NAME.match(group):
        raise invalid(("path", "group"), "a group name is 1-100 letters, digits, '_', '.' or '-', starting with a "
                                         "letter or digit")
    user = user_named(s, member)
    if user is None:
        raise missing("user", member)
    return team, user


def set_group_member(s: Session, team_id: uuid.UUID, actor: uuid.UUID | None, group: str,
                     member: str | uuid.UUID, by: Actor | None = None) -> GroupMember:
    """Put a member of the team in the group (made by its first member); from the next request on it finds the
    team's documents restricted to that group."""
    team, user = _managed(s, team_id, actor, group, member)
    if s.get(TeamMemberRow, (team_id, user.id)) is None:
        raise Refusal(409, f"user {user.name} is not a member of team {team.name!r}: add it to the team first")
    if s.get(TeamGroupMemberRow, (team_id, group, user.id)) is None:
        s.add(TeamGroupMemberRow(team_id=team_id, name=group, user_id=user.id))
        s.flush()
        record(s, recorded_as(actor, by), "team.group.member.set", team_id=team_id, target=("user", user.id),
               details={"group": group, "name": user.name})
    return GroupMember(group, user.id, user.name)


def remove_group_member(s: Session, team_id: uuid.UUID, actor: uuid.UUID | None, group: str,
                        member: str | uuid.UUID, by: Actor | None = None) -> GroupMember:
    """Take a user out of the group (the group ends with its last member); from its next request on it no longer
    finds the documents restricted to that group alone."""
    team, user = _managed(s, team_id, actor, group, member)
    row = s.get(TeamGroupMemberRow, (team_id, group, user.id))
    if row is None:
        raise Refusal(404, f"user {user.name} is not in group {group!r} of team {team.name!r}")
    s.delete(row)
    s.flush()
    record(s, recorded_as(actor, by), "team.group.member.remove", team_id=team_id, target=("user", user.id),
           details={"group": group, "name": user.name})
    return GroupMember(group, user.id, user.name)


def groups_of_team(s: Session, team_id: uuid.UUID) -> list[Group]:
    """Every group of the team with its members (by name, with their roles in the team), by group name."""
    rows = s.execute(select(TeamGroupMemberRow.name, TeamMemberRow.user_id, UserRow.name, TeamMemberRow.role)
                     .join(TeamMemberRow, (TeamMemberRow.team_id == TeamGroupMemberRow.team_id)
                           & (TeamMemberRow.user_id == TeamGroupMemberRow.user_id))
                     .join(UserRow, UserRow.id == TeamGroupMemberRow.user_id)
                     .where(TeamGroupMemberRow.team_id == team_id)
                     .order_by(TeamGroupMemberRow.name, UserRow.name)).all()
    groups: dict[str, list[Member]] = {}
    for group, user_id, name, role in rows:
        groups.setdefault(group, []).append(Member(user_id, name, cast(Role, role)))
    return [Group(name, members) for name, members in groups.items()]
