"""``agentsearch.migrations.upgrade`` under a lock conflict with live traffic: tried again when PostgreSQL ended it
for a deadlock (its transaction rolled back whole), not for any other failure."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import OperationalError

import agentsearch.migrations as migrations


class PgError(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


def failing(times: int, sqlstate: str, calls: list):
    def upgrade(config, revision):
        calls.append(revision)
        if len(calls) <= times:
            raise OperationalError("ALTER TABLE jobs ADD COLUMN access_groups JSONB", {}, PgError(sqlstate))
    return upgrade


def test_a_deadlock_is_tried_again(monkeypatch):
    calls: list = []
    monkeypatch.setattr(migrations.command, "upgrade", failing(2, "40P01", calls))
    monkeypatch.setattr(migrations.time, "sleep", lambda s: None)
    migrations.upgrade("postgresql+psycopg://x@db/x")
    assert calls == ["head"] * 3


def test_another_failure_or_too_many_are_not(monkeypatch):
    calls: list = []
    monkeypatch.setattr(migrations.command, "upgrade", failing(1, "42P01", calls))  # undefined_table
    with pytest.raises(OperationalError):
        migrations.upgrade("postgresql+psycopg://x@db/x")
    assert calls == ["head"]
    calls.clear()
    monkeypatch.setattr(migrations.command, "upgrade", failing(99, "40P01", calls))
    monkeypatch.setattr(migrations.time, "sleep", lambda s: None)
    with pytest.raises(OperationalError):
        migrations.upgrade("postgresql+psycopg://x@db/x")
    assert len(calls) == migrations.TRIES
