"""Alembic migrations: the only way the schema changes. Run with ``agentsearch migrate``.

Usage::

    upgrade("postgresql+psycopg://agentsearch@db/agentsearch")     # to head; a lock conflict is tried again
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.exc import OperationalError

HERE = Path(__file__).resolve().parent
log = logging.getLogger(__name__)
# The upgrade runs while the previous release serves (docs/operations.md, "Upgrades"): an ALTER TABLE waiting for
# its lock behind a job's transaction that then waits behind it is a deadlock, and PostgreSQL ends the migration
# (seen in the deploy drill's upgrade with jobs in flight). The whole upgrade is one transaction, rolled back
# whole, so it is tried again from where the schema was.
TRIES = 5
LOCK_CONFLICTS = {"40P01", "55P03"}  # deadlock_detected, lock_not_available


def alembic_config(database_url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(HERE))
    # ConfigParser interpolation would read '%' in passwords as a format marker.
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return cfg


def upgrade(database_url: str, revision: str = "head") -> None:
    for attempt in range(1, TRIES + 1):
        try:
            command.upgrade(alembic_config(database_url), revision)
            return
        except OperationalError as exc:
            if attempt == TRIES or getattr(exc.orig, "sqlstate", None) not in LOCK_CONFLICTS:
                raise
            log.warning("migration: a lock conflict with live traffic (%s); trying again (%d of %d)",
                        type(exc.orig).__name__, attempt + 1, TRIES)
            time.sleep(attempt)
