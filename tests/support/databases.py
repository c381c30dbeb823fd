"""A PostgreSQL database of a test's own, migrated to the head, dropped afterwards.

Usage::

    @pytest.fixture
    def database():
        with migrated_database("progress") as db:     # agentsearch_progress_<random>
            yield db
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from agentsearch.devstack import PG_ADMIN
from agentsearch.pipeline.platform.db import Database


@contextmanager
def migrated_database(label: str) -> Iterator[Database]:
    name = f"agentsearch_{label}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + f"/{name}"
    from agentsearch.migrations import upgrade

    upgrade(url)
    db = Database(url)
    try:
        yield db
    finally:
        db.dispose()
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
