"""What every failed test that drives a real stack prints: the last lines of each stack process's log.

A failure on a stack (API, workers, beat, Milvus, Redis, PostgreSQL, Flower, an extra API) is then read from the
test run's output alone: each log written to while the test ran is added to the failure's report as a section of
its own, its last 40 lines, so a fault that shows once in CI is diagnosed from that run instead of reproduced.
"""

from __future__ import annotations

import time

import pytest

from agentsearch.devstack.processes import log_tails

_STARTED = pytest.StashKey[float]()


# A unit test's database, and an integration test's SQLite side beside its PostgreSQL one (the embedded mode's).
@pytest.fixture
def migrated_db(tmp_path):
    """A SQLite database of the current schema (the migrations run to their head) in the test's own directory."""
    from agentsearch.pipeline.platform.db import Database
    from tests.support.databases import migrated_sqlite

    url = f"sqlite:///{tmp_path / 'agentsearch.db'}"
    migrated_sqlite(url)
    database = Database(url)
    yield database
    database.dispose()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # A second of slack: a file's modification time may be rounded down.
    item.stash[_STARTED] = time.time() - 1.0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if not report.failed or _STARTED not in item.stash:
        return
    for log, tail in log_tails(since=item.stash[_STARTED]):
        report.sections.append((f"{log.parent.name}/{log.name} (last lines, {report.when})", tail))
