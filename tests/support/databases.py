"""A database of a test's own at the schema's head: PostgreSQL (dropped afterwards) or a SQLite file.

Either is a copy of one this process migrated once: the migrations take one to three seconds a run, which a few
hundred tests each paid; the copy is the database the run would have made (PostgreSQL's ``CREATE DATABASE ...
TEMPLATE``; a SQLite file's bytes, which hold nothing of where the file lives), in milliseconds. The migrations
themselves are run and checked on their own (tests/unit/platform/test_tables.py, tests/integration/test_upgrade.py).

Usage::

    @pytest.fixture
    def database():
        with migrated_database("progress") as db:     # agentsearch_progress_<random>
            yield db

    migrated_sqlite(f"sqlite:///{tmp_path / 'service.db'}")    # as migrations.upgrade(url) would leave it
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from agentsearch.devstack import PG_ADMIN
from agentsearch.pipeline.platform.db import Database


def _admin(sql: str) -> None:
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(sql)


def _url(name: str) -> str:
    return PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + f"/{name}"


@functools.cache
def _postgres_head() -> str:
    """A PostgreSQL database migrated to the head, once a process, the template of the tests' own; dropped when the
    process ends. No connection stays open on it: PostgreSQL copies a template only while none is."""
    from agentsearch.migrations import upgrade

    name = f"agentsearch_head_{uuid.uuid4().hex[:10]}"
    _admin(f'CREATE DATABASE "{name}"')
    atexit.register(_admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    upgrade(_url(name))
    return name


@contextmanager
def migrated_database(label: str) -> Iterator[Database]:
    name = f"agentsearch_{label}_{uuid.uuid4().hex[:10]}"
    _admin(f'CREATE DATABASE "{name}" TEMPLATE "{_postgres_head()}"')
    db = Database(_url(name))
    try:
        yield db
    finally:
        db.dispose()
        _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


SQLITE = "sqlite:///"


@functools.cache
def _sqlite_head() -> Path:
    """A SQLite file migrated to the head, once a process; removed when the process ends."""
    from agentsearch.migrations import upgrade

    directory = Path(tempfile.mkdtemp(prefix="agentsearch-head-"))
    atexit.register(shutil.rmtree, directory, True)
    upgrade(f"{SQLITE}{directory / 'head.db'}")
    return directory / "head.db"


def migrated_sqlite(url: str) -> None:
    """The SQLite database at ``url`` (``sqlite:///<path>``, none there yet) at the schema's head, as
    ``agentsearch.migrations.upgrade(url)`` leaves a new one."""
    assert url.startswith(SQLITE), url
    target = Path(url.removeprefix(SQLITE))
    assert not target.exists(), f"{target} is there already: a copy would replace it, a migration would not"
    shutil.copyfile(_sqlite_head(), target)
