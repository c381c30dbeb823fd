"""``agentsearch users``: API users and their keys (stored hashed; a key is shown once, when it is made).

Usage::

    agentsearch users create alice               # the key alone on the last line
    agentsearch users new-key alice --label ci   # another key (rotation)
    agentsearch users new-key alice --label bot --scope search,read --collection handbook --expires 30d
    agentsearch users list                       # users and their keys' prefixes and limits
    agentsearch users revoke as_XXXXXXXX         # by the prefix `users list` shows
    agentsearch users limits alice --searches-per-minute 10 --max-running-jobs 2   # over the defaults
    agentsearch users limits alice               # the limits in force for alice, and where each comes from
    agentsearch users limits alice --reset       # back to the defaults
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from agentsearch.cli.database import operator_database
from agentsearch.cli.errors import fail

if TYPE_CHECKING:
    from agentsearch.pipeline.security.key_limits import KeyLimits

# Each command imports the user store when it runs (SQLAlchemy: see src/agentsearch/cli/__init__.py).


@click.group()
def users() -> None:
    """API users and their keys (keys are stored hashed and shown once)."""


def _store():
    from agentsearch.pipeline.security.users import UserStore

    return UserStore(operator_database())


def _audited(action: str, target: tuple[str, object], details: dict | None = None) -> None:
    """The operator's change in the audit trail, right after it (the user store commits its own)."""
    from agentsearch.pipeline.security.audit import OPERATOR, Actor, record

    with operator_database().session() as s:
        record(s, Actor(None, OPERATOR), action, target=target, details=details or {})


@users.command("create")
@click.argument("name")
def users_create(name: str) -> None:
    """Create a user and print its first API key, alone on the last line (it is not shown again)."""
    from agentsearch.pipeline.security.users import UserError

    try:
        user_id, key = _store().create(name)
    except UserError as exc:
        fail(str(exc))
    _audited("user.create", ("user", user_id), {"name": name})
    click.echo(f"created user {name} ({user_id}); its API key follows and will not be shown again:")
    click.echo(key)


@users.command("new-key")
@click.argument("name")
@click.option("--label", default="", help="What the key is for.")
@click.option("--scope", "scopes", default=None, metavar="SCOPES",
              help="What the key may do, comma-separated: search, read, write (default: everything).")
@click.option("--collection", "collections", multiple=True, metavar="NAME",
              help="A collection of the user's the key sees; repeat for more (default: all of them).")
@click.option("--expires", default=None, metavar="DURATION", help="When the key stops working: 30d, 12h, 90m, 2w.")
def users_new_key(name: str, label: str, scopes: str | None, collections: tuple[str, ...],
                  expires: str | None) -> None:
    """Issue another key for a user (rotate: issue, switch clients, revoke the old one), limited if asked."""
    from agentsearch.pipeline.security.key_limits import KeyLimitError, KeyLimits, parse_duration
    from agentsearch.pipeline.security.users import SHOWN_CHARS, UserError

    store = _store()
    try:
        limits = KeyLimits.of(
            scopes=scopes.split(",") if scopes is not None else None,
            collections=store.collections_named(store.user_id(name), list(collections)) if collections else None,
            expires_in=parse_duration(expires) if expires is not None else None,
        )
        key = store.issue_key(name, label, limits)
    except (UserError, KeyLimitError) as exc:
        fail(str(exc))
    _audited("key.create", ("key", key[:SHOWN_CHARS]), {"user": name, "label": label, **limits.shown()})
    click.echo(f"new API key for {name}{_limits_text(limits, collections)}; it will not be shown again:")
    click.echo(key)


def _limits_text(limits: KeyLimits, collection_names: tuple[str, ...] = ()) -> str:
    """The key's limits in a few words (empty for a key without any)."""
    parts = []
    if limits.scopes is not None:
        parts.append("scopes " + ",".join(sorted(limits.scopes)))
    if limits.collections is not None:
        parts.append("collections " + ",".join(collection_names or sorted(str(c) for c in limits.collections)))
    if limits.expires_at is not None:
        parts.append(f"expires {limits.expires_at:%Y-%m-%d %H:%M} UTC")
    return f" ({'; '.join(parts)})" if parts else ""


@users.command("revoke")
@click.argument("prefix")
def users_revoke(prefix: str) -> None:
    """Revoke a key by its prefix, as `users list` shows it."""
    from agentsearch.pipeline.security.users import UserError

    try:
        count = _store().revoke(prefix)
    except UserError as exc:
        fail(str(exc))
    if not count:
        fail(f"no live key starts with {prefix!r}")
    _audited("key.revoke", ("key", prefix), {"revoked": count})
    click.echo(f"revoked {count} key(s)")


@users.command("list")
def users_list() -> None:
    """Users with their keys' prefixes (never the keys) and each key's limits."""
    from agentsearch.pipeline.platform.db import utcnow

    now = utcnow()
    for user in _store().list():
        live = [k for k in user.keys if k.revoked_at is None and not k.limits.expired(now)]
        click.echo(f"{user.name:<24} {user.id}  {len(live)} live key(s)")
        for k in user.keys:
            state = f"revoked {k.revoked_at:%Y-%m-%d %H:%M}" if k.revoked_at else "live"
            if not k.revoked_at and k.limits.expired(now):
                state = f"expired {k.limits.expires_at:%Y-%m-%d %H:%M}"
            click.echo(f"    {k.prefix}...  {state:<24} {k.label}{_limits_text(k.limits)}")


LIMIT_VALUE = click.IntRange(0, 2**31 - 1)


@users.command("limits")
@click.argument("name")
@click.option("--searches-per-minute", type=LIMIT_VALUE, help="Search submissions (jobs started) per minute.")
@click.option("--reads-per-minute", type=LIMIT_VALUE, help="Other requests (reads, configs, deletes) per minute.")
@click.option("--ingest-per-minute", type=LIMIT_VALUE, help="Ingestion requests per minute.")
@click.option("--max-running-jobs", type=LIMIT_VALUE, help="Jobs queued or running at once.")
@click.option("--max-documents", type=LIMIT_VALUE, help="Documents stored across the user's collections.")
@click.option("--reset", is_flag=True, help="Drop the user's own values first: the defaults apply again.")
def users_limits(name: str, reset: bool, **values: int | None) -> None:
    """Set a user's rate limits and quotas over the defaults (0 allows none); with no option, print them.

    The API reads them on every request, so a change applies at once in every API process. Defaults come from
    AGENTSEARCH_RATE_LIMIT_* and AGENTSEARCH_MAX_* as this command's environment sets them.
    """
    from agentsearch.pipeline.platform.settings import get_settings
    from agentsearch.pipeline.security.quotas import LimitOverrides, Limits, QuotaError, QuotaStore

    store = QuotaStore(operator_database())
    try:
        if reset or any(v is not None for v in values.values()):
            overrides = store.set_overrides(name, LimitOverrides(**values), reset=reset)
            given = {field: value for field, value in values.items() if value is not None}
            _audited("user.limits", ("user", name), {"reset": reset, **given})
        else:
            overrides = store.overrides(name)
    except QuotaError as exc:
        fail(str(exc))
    limits = Limits.defaults(get_settings()).overlaid(overrides)
    own = set(overrides.set_names())
    click.echo(f"limits of {name}:")
    for field, value in limits.model_dump().items():
        click.echo(f"    {field:<22} {value:>12}  {'set for this user' if field in own else 'default'}")
