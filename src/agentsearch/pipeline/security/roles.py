"""A team member's role and what it covers; the rules for changing who is in a team with which role.

Roles, each covering those below it: ``admin`` (the team's members, and everything an editor does), ``editor`` (the
documents, agent sets, settings and webhooks of the team's collections), ``viewer`` (search them, read their
documents and jobs). The owner of a personal collection holds ``owner`` over it, which covers every role. Which
role each route needs is declared in ``agentsearch.api.route_rules``; finding a collection or job with it is
``agentsearch.pipeline.security.access``.

Membership rules (``change_problem``): only an admin adds, removes or changes a member; nobody changes their own
role (an admin cannot be demoted by mistake, a member never raises itself); any member may leave; the team's last
admin can be neither demoted nor removed, so a team always has someone who can manage it.

Usage::

    covers("editor", "viewer")                                     # True
    change_problem(actor="u1", actor_role="admin", target="u1", current="admin", wanted="viewer", admins=2)
    # Refusal(403, "you cannot change your own role ...")
"""

from __future__ import annotations

import uuid
from typing import Literal, get_args

from agentsearch.pipeline.refusal import Refusal

Role = Literal["viewer", "editor", "admin"]
ROLES: tuple[Role, ...] = get_args(Role)  # lowest first
# What a caller holds over a collection: a team role, or ``owner`` of its own personal collection.
Held = Literal["viewer", "editor", "admin", "owner"]
RANK: dict[str, int] = {"viewer": 0, "editor": 1, "admin": 2, "owner": 3}


class RoleError(ValueError):
    """A role name that is not one of ``ROLES``."""


def checked_role(name: str) -> Role:
    role = name.strip().lower()
    if role not in ROLES:
        raise RoleError(f"unknown role {name!r}; roles: {', '.join(ROLES)}")
    return role


def covers(held: Held | None, needed: Role) -> bool:
    """Whether holding ``held`` allows what ``needed`` allows (None: not a member)."""
    return held is not None and RANK[held] >= RANK[needed]


def beyond_role(needed: Role, held: Held, what: str, team: str) -> Refusal:
    """403 naming the role needed: the member sees the thing, but may not do this to it."""
    return Refusal(403, f"{what} needs the role '{needed}' in team {team!r}; your role there is '{held}'")


def change_problem(actor: uuid.UUID | str, actor_role: Role, target: uuid.UUID | str, current: Role | None,
                   wanted: Role | None, admins: int) -> Refusal | None:
    """Why the actor may not give ``target`` the role ``wanted`` (None: remove it from the team), or None.

    ``current`` is the target's role now (None: not a member), ``admins`` how many admins the team has."""
    own = str(actor) == str(target)
    if own and wanted is not None:
        return Refusal(403, "you cannot change your own role; another admin of the team changes it")
    if not own and actor_role != "admin":
        return Refusal(403, f"managing the team's members needs the role 'admin'; your role is '{actor_role}'")
    if current is None and wanted is None:
        return Refusal(404, f"user {target} is not a member of the team")
    if current == "admin" and wanted != "admin" and admins <= 1:
        return Refusal(409, "this is the team's last admin: make another member admin first, so the team keeps "
                            "someone who can manage it")
    return None
