"""A backup of the service's database, with a manifest and checksums, and its restore into a fresh one.

The database is everything there is to keep: users and keys, collections and every document's text, agent
configs, jobs with their responses, artifacts (their bytes are in their rows, ``agentsearch.pipeline.job.artifacts``),
webhooks, conversations. Milvus is not in a backup: it is made of the documents' text, and ``agentsearch reindex``
(``agentsearch.pipeline.operations.reindex``) rebuilds it after a restore. Redis holds caches, rate windows, the
broker's messages and answer streams of the last hour: nothing a restore brings back.

A backup directory holds the dump (PostgreSQL: ``pg_dump -Fc``, taken in the snapshot the rows were counted in;
embedded SQLite: a copy made with SQLite's online backup) and ``manifest.json``: the format, the agentsearch
version, the schema's Alembic revision, when it was made, each file's size and SHA-256, and the rows of every table.
A restore checks every file against it before it touches anything, refuses a database that holds tables unless
told to replace them, restores in one transaction, and counts the rows again.

Usage::

    manifest = make_backup("postgresql+psycopg://host/agentsearch", Path("/backups/2026-11-27"))
    manifest["rows"]["jobs"], manifest["files"]["database.dump"]["sha256"]
    verify_backup(Path("/backups/2026-11-27"))              # BackupInvalid naming the file or field that does not match
    restore_backup(Path("/backups/2026-11-27"), "postgresql+psycopg://host/agentsearch_restored")
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
from contextlib import closing
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url

from agentsearch.pipeline.operations.backup_manifest import manifest_problems

MANIFEST = "manifest.json"
FORMAT = 1
PG_DUMP_FILE = "database.dump"
SQLITE_FILE = "database.sqlite"
MILVUS_NOTE = "not in the backup: rebuilt from the database's documents by `agentsearch reindex`"
_READ_BYTES = 1 << 20


class BackupError(RuntimeError):
    """A backup or restore that cannot be done; the message says why, for the operator."""


class BackupInvalid(BackupError):
    """The backup directory does not match its manifest: a file missing, cut short or changed."""


class TargetNotEmpty(BackupError):
    """The database to restore into already holds tables."""


def make_backup(database_url: str, directory: Path) -> dict[str, Any]:
    """Back the database at ``database_url`` up into ``directory`` (new, or empty); returns the manifest."""
    directory.mkdir(parents=True, exist_ok=True)
    if any(directory.iterdir()):
        raise BackupError(f"{directory} is not empty: a backup goes into a new or empty directory")
    if _is_sqlite(database_url):
        rows, revision = _copy_sqlite(_sqlite_path(database_url), directory / SQLITE_FILE)
        kind, files = "sqlite", [SQLITE_FILE]
    else:
        rows, revision = _dump_postgres(database_url, directory / PG_DUMP_FILE)
        kind, files = "postgresql", [PG_DUMP_FILE]
    manifest = {
        "format": FORMAT,
        "agentsearch": _own_version(),
        "alembic_revision": revision,
        "created_at": datetime.now(UTC).isoformat(),
        "database": kind,
        "files": {name: {"bytes": (directory / name).stat().st_size, "sha256": sha256_of(directory / name)}
                  for name in files},
        "rows": rows,
        "milvus": MILVUS_NOTE,
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def verify_backup(directory: Path) -> dict[str, Any]:
    """The manifest, once every file it names is there with its size and SHA-256; ``BackupInvalid`` otherwise."""
    path = directory / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise BackupInvalid(f"{path}: no manifest; not a backup directory") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BackupInvalid(f"{path}: not a readable manifest ({exc})") from None
    if isinstance(manifest, dict) and manifest.get("format") != FORMAT:
        raise BackupInvalid(f"{path}: format {manifest.get('format')!r}, this version reads format {FORMAT}")
    # Checked whole first: a restore must not stop half-way on a field it reads later.
    if problems := manifest_problems(manifest):
        raise BackupInvalid(f"{path}: not a manifest this version can restore: {'; '.join(problems)}")
    dump = SQLITE_FILE if manifest["database"] == "sqlite" else PG_DUMP_FILE
    if dump not in manifest["files"]:
        raise BackupInvalid(f"{path}: files: no {dump}, the dump of a {manifest['database']} backup")
    for name, expected in manifest["files"].items():
        file = directory / name
        if not file.is_file():
            raise BackupInvalid(f"{file}: missing")
        if file.stat().st_size != expected["bytes"]:
            raise BackupInvalid(f"{file}: {file.stat().st_size} bytes, the manifest says {expected['bytes']}")
        if sha256_of(file) != expected["sha256"]:
            raise BackupInvalid(f"{file}: its SHA-256 does not match the manifest's; the file was changed")
    return manifest


def restore_backup(directory: Path, database_url: str, force: bool = False) -> dict[str, Any]:
    """Restore the backup in ``directory`` into the database at ``database_url`` (a PostgreSQL database is created
    when missing); returns the manifest. Checked first (``verify_backup``); a database that holds tables is refused
    (``TargetNotEmpty``) unless ``force``, which replaces them. The rows are counted after and must be the
    manifest's."""
    manifest = verify_backup(directory)
    if manifest["database"] != ("sqlite" if _is_sqlite(database_url) else "postgresql"):
        raise BackupError(f"the backup is of a {manifest['database']} database; restore it into one of those")
    if _is_sqlite(database_url):
        target = _sqlite_path(database_url)
        if not force and target.exists() and _sqlite_tables(target):
            raise TargetNotEmpty(f"{target} already holds tables: restore into a new database, or give --force")
        target.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(directory / SQLITE_FILE)) as source, closing(sqlite3.connect(target)) as into:
            source.backup(into)
        rows = _sqlite_rows(target)
    else:
        url = libpq_url(database_url)
        _create_if_missing(url)
        with psycopg.connect(url) as conn:
            held = _pg_tables(conn)
        if held and not force:
            raise TargetNotEmpty(f"database {make_url(database_url).database!r} already holds {len(held)} tables: "
                                 "restore into a new database, or give --force")
        # One transaction: a restore that fails half-way leaves the database as it was. --clean drops what the
        # dump holds first (only with --force: a database with tables).
        _run(["pg_restore", "--no-owner", "--no-privileges", "--single-transaction", "--exit-on-error",
              *(["--clean", "--if-exists"] if held else []), str(directory / PG_DUMP_FILE)], url)
        with psycopg.connect(url) as conn:
            rows = _pg_rows(conn)
    if rows != manifest["rows"]:
        differ = sorted(t for t in {*rows, *manifest["rows"]} if rows.get(t) != manifest["rows"].get(t))
        raise BackupError(f"restored, but the rows differ from the manifest's in {', '.join(differ)}")
    return manifest


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_READ_BYTES):
            digest.update(block)
    return digest.hexdigest()


def libpq_url(database_url: str) -> str:
    """A SQLAlchemy URL (``postgresql+psycopg://...``) as libpq, pg_dump and pg_restore take it."""
    return make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)


def _dump_postgres(database_url: str, out: Path) -> tuple[dict[str, int], str | None]:
    """``pg_dump -Fc`` taken in the snapshot the rows are counted in, so the manifest's counts are the dump's."""
    url = libpq_url(database_url)
    with psycopg.connect(url) as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        snapshot = _one(conn, "SELECT pg_export_snapshot()")
        rows = _pg_rows(conn)
        revision = _revision(conn.execute)
        # The snapshot lives as long as this transaction: pg_dump runs inside it.
        _run(["pg_dump", "--format=custom", "--snapshot", snapshot, "--file", str(out)], url)
        conn.rollback()
    return rows, revision


def _copy_sqlite(source_path: Path, out: Path) -> tuple[dict[str, int], str | None]:
    """SQLite's online backup: a consistent copy while the service may be writing (WAL), then counted."""
    if not source_path.exists():
        raise BackupError(f"{source_path}: no database there")
    with closing(sqlite3.connect(source_path)) as source, closing(sqlite3.connect(out)) as copy:
        source.backup(copy)
    with closing(sqlite3.connect(out)) as copy:
        revision = _revision(copy.execute)
    return _sqlite_rows(out), revision


def _revision(execute) -> str | None:
    try:
        row = execute("SELECT version_num FROM alembic_version").fetchone()
    except (psycopg.Error, sqlite3.Error):
        return None
    return row[0] if row else None


def _pg_tables(conn: psycopg.Connection) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename").fetchall()]


def _pg_rows(conn: psycopg.Connection) -> dict[str, int]:
    return {t: _one(conn, sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(t))) for t in _pg_tables(conn)}


def _one(conn: psycopg.Connection, query: Any) -> Any:
    """The value of a query of one row and one column (a count, a function's answer)."""
    row = conn.execute(query).fetchone()
    assert row is not None  # an aggregate or a function without FROM answers one row
    return row[0]


def _sqlite_tables(path: Path) -> list[str]:
    with closing(sqlite3.connect(path)) as conn:
        return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                           "AND name NOT LIKE 'sqlite_%' ORDER BY name").fetchall()]


def _sqlite_rows(path: Path) -> dict[str, int]:
    tables = _sqlite_tables(path)
    with closing(sqlite3.connect(path)) as conn:
        # The names are the file's own tables, read from sqlite_master above; a table name takes no parameter.
        return {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}  # noqa: S608


def _create_if_missing(url: str) -> None:
    """The restore's database, made on its server when it is not there yet (as the server's maintenance database
    sees it)."""
    name = make_url(url).database
    try:
        psycopg.connect(url).close()
        return
    except psycopg.OperationalError as exc:
        if "does not exist" not in str(exc):
            raise BackupError(f"cannot reach the database to restore into: {exc}") from None
    if name is None:
        raise BackupError(f"the URL to restore into names no database: {url}")
    admin = make_url(url).set(database="postgres").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def _run(command: list[str], database_url: str) -> None:
    """A PostgreSQL client program on the database: its password in its environment, not on its command line
    (where every user of the host could read it)."""
    url = make_url(libpq_url(database_url))
    env = {**os.environ, "PGCONNECT_TIMEOUT": os.environ.get("PGCONNECT_TIMEOUT", "10")}
    if url.password:
        env["PGPASSWORD"] = str(url.password)
    dsn = url.set(password=None).render_as_string(hide_password=False)
    try:
        done = subprocess.run([*command, "--dbname", dsn], capture_output=True, text=True, env=env)
    except FileNotFoundError:
        raise BackupError(f"{command[0]} not found: install PostgreSQL's client programs (postgresql-client), of "
                          "the server's major version or newer") from None
    if done.returncode != 0:
        raise BackupError(f"{command[0]} failed: {done.stderr.strip() or done.stdout.strip()}")


def _is_sqlite(database_url: str) -> bool:
    return make_url(database_url).get_backend_name() == "sqlite"


def _sqlite_path(database_url: str) -> Path:
    return Path(make_url(database_url).database or "")


def _own_version() -> str:
    try:
        return version("agentsearch")
    except PackageNotFoundError:
        return "unknown"
