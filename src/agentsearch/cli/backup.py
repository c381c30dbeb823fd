"""``agentsearch backup`` and ``agentsearch restore``: the database into a directory with a manifest, and back.

Usage::

    agentsearch backup /backups/2026-11-27                  # pg_dump -Fc (or SQLite's copy) and manifest.json
    agentsearch restore /backups/2026-11-27 --database-url postgresql+psycopg://db/agentsearch_new --reindex
    agentsearch restore /backups/2026-11-27 --force         # into the configured database, replacing its tables

Milvus is not in a backup: after a restore, ``agentsearch reindex`` rebuilds it from the documents
(``--reindex`` runs it at once). What a backup holds and how a restore checks it:
``agentsearch.pipeline.operations.backup``.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from agentsearch.cli.errors import fail
from agentsearch.pipeline.platform.settings import get_settings


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def backup(directory: Path) -> None:
    """Back the database up into DIRECTORY (new or empty): the dump and manifest.json with checksums."""
    from agentsearch.pipeline.operations.backup import BackupError, make_backup

    started = time.monotonic()
    try:
        manifest = make_backup(get_settings().resolved_database_url, directory)
    except BackupError as exc:
        fail(str(exc))
    for name, file in manifest["files"].items():
        click.echo(f"{directory / name}: {file['bytes']:,} bytes, sha256 {file['sha256']}")
    click.echo(f"{sum(manifest['rows'].values()):,} rows of {len(manifest['rows'])} tables, schema "
               f"{manifest['alembic_revision']}, in {time.monotonic() - started:.1f} s; Milvus is not in it: "
               "`agentsearch reindex` rebuilds it after a restore")


@click.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--database-url", default=None, help="The database to restore into; default the configured one.")
@click.option("--force", is_flag=True, help="Replace the tables of a database that has some.")
@click.option("--reindex", "then_reindex", is_flag=True, help="Rebuild every collection's Milvus data after.")
def restore(directory: Path, database_url: str | None, force: bool, then_reindex: bool) -> None:
    """Restore the backup in DIRECTORY: its checksums checked first, then the database, then (--reindex) Milvus."""
    from agentsearch.pipeline.operations.backup import BackupError, restore_backup

    settings = get_settings()
    url = database_url or settings.resolved_database_url
    started = time.monotonic()
    try:
        manifest = restore_backup(directory, url, force=force)
    except BackupError as exc:
        fail(str(exc))
    click.echo(f"restored {sum(manifest['rows'].values()):,} rows of {len(manifest['rows'])} tables, schema "
               f"{manifest['alembic_revision']}, made {manifest['created_at']}, in {time.monotonic() - started:.1f} s")
    if not then_reindex:
        click.echo("Milvus is not in a backup: run `agentsearch reindex` with this database to rebuild it")
        return
    from agentsearch.cli.reindex import rebuild
    from agentsearch.pipeline.platform.db import Database

    rebuild(settings.model_copy(update={"database_url": url}), Database(url))
