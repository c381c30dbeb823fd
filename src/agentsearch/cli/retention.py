"""``agentsearch retention``: what is past its retention, pruned now or only counted, as the periodic task does it.

Usage::

    agentsearch retention run --dry-run           # what would go, per kind, with each kind's cutoff; nothing deleted
    agentsearch retention run                     # prune it, in batches of AGENTSEARCH_RETENTION_BATCH_ROWS
    agentsearch retention run --dry-run --json    # {"dry_run", "counts": {kind: rows}, "total", "cutoffs", ...}

It works on the database of AGENTSEARCH_DATABASE_URL directly, as ``users`` and ``tools`` do; a real run adds what
it pruned to ``/metrics`` (``agentsearch_retention_pruned_total``) when AGENTSEARCH_REDIS_URL is set. The settings
and what goes with what: docs/operations.md "Retention".
"""

from __future__ import annotations

import json

import click

from agentsearch.cli.database import operator_database

# The command imports the retention module when it runs (SQLAlchemy: see src/agentsearch/cli/__init__.py).


@click.group()
def retention() -> None:
    """What is kept and for how long: finished jobs with their artifacts, webhook deliveries, conversation turns."""


@retention.command("run")
@click.option("--dry-run", is_flag=True, help="Count what would go; delete nothing.")
@click.option("--json", "as_json", is_flag=True,
              help='Print {"dry_run", "counts": {kind: rows}, "total", "cutoffs", "seconds", "complete"}.')
def retention_run(dry_run: bool, as_json: bool) -> None:
    """Prune every kind past its retention now (the beat task does it every AGENTSEARCH_RETENTION_INTERVAL_S)."""
    from agentsearch.pipeline.observability.metrics import MetricsRecorder
    from agentsearch.pipeline.operations.retention import RetentionPolicy, prune
    from agentsearch.pipeline.platform.kv import connect_redis
    from agentsearch.pipeline.platform.settings import get_settings

    settings = get_settings()
    report = prune(operator_database(), RetentionPolicy.of(settings), dry_run=dry_run)
    if not dry_run and settings.redis_url:
        MetricsRecorder(connect_redis(settings.redis_url)).record_retention(report.counts)
    if as_json:
        click.echo(json.dumps(report.as_dict()))
        return
    click.echo(f"{'would go (dry run)' if dry_run else 'pruned'}: {report.total} rows in {report.seconds:.2f} s")
    for kind, rows in report.counts.items():
        cutoff = report.cutoffs.get(kind, "")
        since = "kept for ever" if cutoff is None else f"older than {cutoff:%Y-%m-%d %H:%M} UTC" if cutoff else ""
        click.echo(f"  {kind:<20} {rows:>9}  {since}".rstrip())
    if not report.complete:
        click.echo("stopped before the end: run it again to go on")
