"""``agentsearch audit``: the audit trail for operators, read from the database like ``users`` and ``teams``.

Usage::

    agentsearch audit                                         # the newest 50 events of the whole service
    agentsearch audit --team support --action 'team.*'        # a team's membership changes
    agentsearch audit --actor alice --since 2d --limit 200    # alice's last two days (or --since 2026-11-01)
    agentsearch audit --json                                  # one JSON object per line, newest first
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import click

from agentsearch.cli.database import operator_database
from agentsearch.cli.errors import fail

# The command imports the audit module when it runs (SQLAlchemy: see src/agentsearch/cli/__init__.py).


def since_of(text: str, now: datetime) -> datetime:
    """``2d``, ``12h``, ``90m``, ``1w`` ago, or an ISO 8601 time (UTC when it names no zone)."""
    from agentsearch.pipeline.security.key_limits import DURATION, UNIT_SECONDS

    if (match := DURATION.match(text)) is not None:
        return now - timedelta(seconds=int(match[1]) * UNIT_SECONDS[match[2]])
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is neither a span (2d, 12h) nor an ISO 8601 time",
                                 param_hint="--since") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=now.tzinfo)


@click.command("audit")
@click.option("--team", default=None, metavar="NAME", help="Only the events of this team (name or id).")
@click.option("--actor", default=None, metavar="NAME", help="Only the events of this user (name or id).")
@click.option("--action", default=None, metavar="A", help="An action (document.add) or a family (team.*).")
@click.option("--since", default=None, metavar="WHEN", help="2d, 12h, 1w ago, or an ISO 8601 time.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 200), help="Events shown.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def audit(team: str | None, actor: str | None, action: str | None, since: str | None, limit: int,
          as_json: bool) -> None:
    """Who changed what and who searched, newest first (the audit trail of docs/security.md)."""
    from sqlalchemy import select

    from agentsearch.pipeline.platform.db import utcnow
    from agentsearch.pipeline.platform.tables.users import UserRow
    from agentsearch.pipeline.security.audit import events, shown
    from agentsearch.pipeline.security.teams import team_named, user_named

    after = since_of(since, utcnow()) if since is not None else None
    with operator_database().session() as s:
        team_id = actor_id = None
        if team is not None:
            if (found := team_named(s, team)) is None:
                fail(f"no team named {team!r}")
            team_id = found.id
        if actor is not None:
            if (user := user_named(s, actor)) is None:
                fail(f"no user named {actor!r}")
            actor_id = user.id
        page = events(s, team_id=team_id, actor_id=actor_id, action=action, since=after, limit=limit)
        actors = {e.actor_id for e in page}
        names = dict(s.execute(select(UserRow.id, UserRow.name).where(UserRow.id.in_(actors))).all())
        rows = [shown(e, names) for e in page]
    for row in rows:
        if as_json:
            click.echo(json.dumps(row))
            continue
        target = f"{row['target_type']} {row['target_id']}".strip()
        click.echo(f"{row['at'][:19]}  {row['actor'] or row['actor_id']:<16} {row['key_prefix']:<11} "
                   f"{row['action']:<22} {target}")
    if not rows and not as_json:
        click.echo("no events")
