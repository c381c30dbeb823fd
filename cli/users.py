"""``agentsearch users``: API users and their keys (stored hashed; a key is shown once, when it is made).

Usage::

    agentsearch users create alice               # the key alone on the last line
    agentsearch users new-key alice --label ci   # another key (rotation)
    agentsearch users list                       # users and their keys' prefixes
    agentsearch users revoke as_XXXXXXXX         # by the prefix `users list` shows
"""

from __future__ import annotations

import click

from cli.database import operator_database
from cli.errors import fail

# Each command imports the user store when it runs (SQLAlchemy: see cli/__init__.py).


@click.group()
def users() -> None:
    """API users and their keys (keys are stored hashed and shown once)."""


def _store():
    from pipeline.security.users import UserStore

    return UserStore(operator_database())


@users.command("create")
@click.argument("name")
def users_create(name: str) -> None:
    """Create a user and print its first API key, alone on the last line (it is not shown again)."""
    from pipeline.security.users import UserError

    try:
        user_id, key = _store().create(name)
    except UserError as exc:
        fail(str(exc))
    click.echo(f"created user {name} ({user_id}); its API key follows and will not be shown again:")
    click.echo(key)


@users.command("new-key")
@click.argument("name")
@click.option("--label", default="", help="What the key is for.")
def users_new_key(name: str, label: str) -> None:
    """Issue another key for a user (rotate: issue, switch clients, revoke the old one)."""
    from pipeline.security.users import UserError

    try:
        key = _store().issue_key(name, label)
    except UserError as exc:
        fail(str(exc))
    click.echo(f"new API key for {name}; it will not be shown again:")
    click.echo(key)


@users.command("revoke")
@click.argument("prefix")
def users_revoke(prefix: str) -> None:
    """Revoke a key by its prefix, as `users list` shows it."""
    from pipeline.security.users import UserError

    try:
        count = _store().revoke(prefix)
    except UserError as exc:
        fail(str(exc))
    if not count:
        fail(f"no live key starts with {prefix!r}")
    click.echo(f"revoked {count} key(s)")


@users.command("list")
def users_list() -> None:
    """Users with their keys' prefixes (never the keys)."""
    for user in _store().list():
        live = [k for k in user.keys if k.revoked_at is None]
        click.echo(f"{user.name:<24} {user.id}  {len(live)} live key(s)")
        for k in user.keys:
            state = f"revoked {k.revoked_at:%Y-%m-%d %H:%M}" if k.revoked_at else "live"
            click.echo(f"    {k.prefix}...  {state:<24} {k.label}")
