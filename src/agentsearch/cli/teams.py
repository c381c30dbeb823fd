"""``agentsearch teams``: teams, their members and roles and document groups, straight on the database as an
operator (like ``users``).

The operator may manage any team, held to the rule that a team keeps at least one admin. Users and teams are named
by name or id. A team's collections are named ``TEAM/NAME`` by ``ingest`` and ``search --collection``.

Usage::

    agentsearch teams create support --admin alice       # alice is its first admin (default: the local user)
    agentsearch teams add-member support bob --role viewer   # adds bob, or gives him that role
    agentsearch teams remove-member support bob
    agentsearch teams list                               # every team with its member and collection counts
    agentsearch teams show support                       # its members and roles, its groups, its collections
    agentsearch teams group-add support hr bob           # bob (a member) in the document group hr, made if new
    agentsearch teams group-remove support hr bob        # the group ends with its last member
    agentsearch teams groups support                     # each group with its members
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from agentsearch.cli.database import operator_database
from agentsearch.cli.errors import fail

if TYPE_CHECKING:
    from agentsearch.pipeline.security.roles import Role

# Each command imports the team functions when it runs (SQLAlchemy: see src/agentsearch/cli/__init__.py).
ROLE_NAMES = ("viewer", "editor", "admin")


@click.group()
def teams() -> None:
    """Teams: users sharing collections, each with a role (admin, editor, viewer)."""


def _team_or_fail(s, ident: str):
    from agentsearch.pipeline.security.teams import team_named

    team = team_named(s, ident)
    if team is None:
        fail(f"no team named {ident!r}")
    return team


def _refused(exc) -> None:
    fail(exc.detail)


def _as_operator(change) -> None:
    """``change(s)`` in one session on the database, its message printed; a refusal printed as the API words it."""
    from agentsearch.pipeline.refusal import Refusal

    try:
        with operator_database().session() as s:
            click.echo(change(s))
    except Refusal as exc:
        _refused(exc)


@teams.command("create")
@click.argument("name")
@click.option("--admin", "admin", default=None, metavar="USER", help="Its first admin (default: the local user).")
def teams_create(name: str, admin: str | None) -> None:
    """Create a team with its first admin."""
    from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID
    from agentsearch.pipeline.refusal import Refusal
    from agentsearch.pipeline.security.teams import create_team, user_named

    try:
        with operator_database().session() as s:
            user = user_named(s, admin if admin is not None else DEFAULT_USER_ID)
            if user is None:
                fail(f"no user named {admin!r}")
            team = create_team(s, name, user.id)
            click.echo(f"created team {team.name} ({team.id}); admin: {user.name}")
    except Refusal as exc:
        _refused(exc)


@teams.command("add-member")
@click.argument("team")
@click.argument("user")
@click.option("--role", type=click.Choice(ROLE_NAMES), default="viewer", show_default=True)
def teams_add_member(team: str, user: str, role: Role) -> None:
    """Add a user to a team with a role, or give a member another role."""
    from agentsearch.pipeline.security.teams import set_role

    def change(s) -> str:
        member = set_role(s, _team_or_fail(s, team).id, None, user, role)
        return f"{member.name} is {member.role} of team {team}"

    _as_operator(change)


@teams.command("remove-member")
@click.argument("team")
@click.argument("user")
def teams_remove_member(team: str, user: str) -> None:
    """Take a user out of a team: its next request reaches none of the team's collections."""
    from agentsearch.pipeline.security.teams import remove_member

    def change(s) -> str:
        member = remove_member(s, _team_or_fail(s, team).id, None, user)
        return f"removed {member.name} ({member.role}) from team {team}"

    _as_operator(change)


def _group_change(team: str, group: str, user: str, put: bool) -> None:
    """Put the user in the team's group (``put``), or take it out, as the operator."""
    from agentsearch.pipeline.security.groups import remove_group_member, set_group_member

    def change(s) -> str:
        team_id = _team_or_fail(s, team).id
        if put:
            return f"{set_group_member(s, team_id, None, group, user).name} is in group {group} of team {team}"
        return f"removed {remove_group_member(s, team_id, None, group, user).name} from group {group} of team {team}"

    _as_operator(change)


@teams.command("group-add")
@click.argument("team")
@click.argument("group")
@click.argument("user")
def teams_group_add(team: str, group: str, user: str) -> None:
    """Put a member of a team in one of its document groups (made by its first member): from its next request it
    finds the team's documents restricted to that group."""
    _group_change(team, group, user, put=True)


@teams.command("group-remove")
@click.argument("team")
@click.argument("group")
@click.argument("user")
def teams_group_remove(team: str, group: str, user: str) -> None:
    """Take a user out of a team's document group; the group ends with its last member."""
    _group_change(team, group, user, put=False)


@teams.command("groups")
@click.argument("team")
def teams_groups(team: str) -> None:
    """A team's document groups, each with its members."""
    from agentsearch.pipeline.security.groups import groups_of_team

    with operator_database().session() as s:
        found = _team_or_fail(s, team)
        groups = groups_of_team(s, found.id)
        if not groups:
            click.echo(f"team {found.name} has no document groups; teams group-add {found.name} GROUP USER makes one")
        for group in groups:
            click.echo(f"{group.name:<24} {', '.join(member.name for member in group.members)}")


@teams.command("list")
def teams_list() -> None:
    """Every team, with how many members and collections it has."""
    from sqlalchemy import func, select

    from agentsearch.pipeline.platform.tables.collections import CollectionRow
    from agentsearch.pipeline.platform.tables.teams import TeamMemberRow, TeamRow

    with operator_database().session() as s:
        members = dict(s.execute(select(TeamMemberRow.team_id, func.count()).group_by(TeamMemberRow.team_id)).all())
        shared = dict(s.execute(select(CollectionRow.team_id, func.count()).where(CollectionRow.team_id.is_not(None))
                                .group_by(CollectionRow.team_id)).all())
        for team in s.scalars(select(TeamRow).order_by(TeamRow.name)).all():
            click.echo(f"{team.name:<24} {team.id}  {members.get(team.id, 0)} member(s)  "
                       f"{shared.get(team.id, 0)} collection(s)")


@teams.command("show")
@click.argument("team")
def teams_show(team: str) -> None:
    """A team's members with their roles, its document groups, and its collections."""
    from sqlalchemy import select

    from agentsearch.pipeline.platform.tables.collections import CollectionRow
    from agentsearch.pipeline.security.groups import groups_of_team
    from agentsearch.pipeline.security.teams import members_of

    with operator_database().session() as s:
        found = _team_or_fail(s, team)
        click.echo(f"team {found.name} ({found.id})")
        for member in members_of(s, found.id):
            click.echo(f"    {member.role:<8} {member.name:<24} {member.user_id}")
        for group in groups_of_team(s, found.id):
            click.echo(f"    group {group.name}: {', '.join(member.name for member in group.members)}")
        for collection in s.scalars(select(CollectionRow).where(CollectionRow.team_id == found.id)
                                    .order_by(CollectionRow.name)).all():
            click.echo(f"    collection {found.name}/{collection.name}  {collection.id}")
