"""Persistence: the engines and sessions on PostgreSQL (JSONB) and SQLite, and the declarative base every table
is mapped on.

The tables themselves are in ``agentsearch.pipeline.platform.tables``, a module per domain, each mapped class named
``...Row``. The schema changes only through Alembic (``src/agentsearch/migrations/``). The ``jobs`` table is the truth
about a job.

Usage::

    db = Database(settings.database_url)
    with db.session() as s:
        s.add(CollectionRow(name="docs", user_id=DEFAULT_USER_ID, ...))   #
        agentsearch.pipeline.platform.tables.collections
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import JSON, Engine, create_engine, event
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker

JSONType = JSON().with_variant(JSONB(), "postgresql")


def utcnow() -> datetime:
    return datetime.now(UTC)


def changed_rows(s: Session, statement: Any) -> int:
    """How many rows an UPDATE or DELETE changed: its result is a ``CursorResult``, which ``Session.execute`` is typed
    as the plain ``Result`` without ``rowcount``."""
    return cast(CursorResult[Any], s.execute(statement)).rowcount


class Base(DeclarativeBase):
    pass


def _sqlite_engine(url: str, synchronous: str = "FULL") -> Engine:
    """An engine on the embedded mode's file; ``synchronous``: whether a commit waits for the disk (FULL, SQLite's
    default) or only for the WAL's write (NORMAL)."""
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_conn, _record) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA synchronous={synchronous}")
        cur.close()

    return engine


class Database:
    def __init__(self, url: str, pool_size: int = 5) -> None:
        self.url = url
        if url.startswith("sqlite"):
            # Embedded mode: API thread and worker threads share one file; WAL lets readers run beside a writer.
            self.engine = _sqlite_engine(url)
        else:
            self.engine = create_engine(url, pool_pre_ping=True, pool_size=pool_size, max_overflow=10)
        self._pool_size = pool_size
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._progress_engine: Engine | None = None
        self._progress_lock = threading.Lock()

    @property
    def progress_engine(self) -> Engine:
        """Connections for progress reports only (``JobStore.progress``): one round trip each.

        On SQLite (the embedded mode) they commit without waiting for the disk (``synchronous=NORMAL``, which WAL
        keeps consistent): a report survives the process's crash, not the machine's. A report that keeps the state
        and every other write go through ``engine`` and wait for the disk.

        On PostgreSQL each statement commits on its own (autocommit: no ``BEGIN``, no ``COMMIT``) and does not wait
        for the WAL flush (``synchronous_commit`` off for the connection's whole life, set once as it connects), and
        there is no pre-ping: the caller runs a statement again once on a fresh connection when its connection turns
        out broken. A progress report may be lost by a server crash, never corrupted; every other write goes through
        ``engine`` and commits durably. A session setting: behind a proxy that pools by transaction it would reach
        other clients' connections, so this engine needs a direct connection, as the service's is.
        """
        engine = self._progress_engine
        if engine is not None:
            return engine
        with self._progress_lock:
            if self._progress_engine is None and self.url.startswith("sqlite"):
                self._progress_engine = _sqlite_engine(self.url, synchronous="NORMAL")
            if self._progress_engine is None:
                engine = create_engine(self.url, isolation_level="AUTOCOMMIT", pool_size=self._pool_size,
                                       max_overflow=10)

                @event.listens_for(engine, "connect")
                def _no_flush_wait(dbapi_conn, _record) -> None:
                    cur = dbapi_conn.cursor()
                    cur.execute("SET synchronous_commit TO OFF")
                    cur.close()
                    dbapi_conn.commit()  # a no-op when the driver is already in autocommit

                self._progress_engine = engine
            return self._progress_engine

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A transaction: committed when the block ends, rolled back (nothing half-written) when it raises."""
        with self._sessions() as s, s.begin():
            yield s

    def dispose(self) -> None:
        self.engine.dispose()
        with self._progress_lock:
            if self._progress_engine is not None:
                self._progress_engine.dispose()
                self._progress_engine = None


