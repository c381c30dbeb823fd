"""One progress rule (``agentsearch.pipeline.job.progress_rule``), two dialects: the same reports on a job in PostgreSQL
and in SQLite (the embedded mode) leave the same row and answer the same."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import text

from agentsearch.pipeline.agents.base import Stage
from agentsearch.pipeline.job.job_store import JobStore, set_worker_node
from agentsearch.pipeline.platform.db import Database
from agentsearch.pipeline.records.agent_runs import AgentRun
from tests.integration.test_progress_commit import _job, database  # noqa: F401 - database: the PostgreSQL fixture

pytestmark = pytest.mark.integration


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value  # SQLite hands a JSON column back as its text


def _row(db: Database, job_id) -> tuple:
    """What the reports wrote: status, whether a start time is set, node, stage, the stage log's stages, the records'
    agents, the timings and whether a state is kept."""
    with db.engine.connect() as conn:
        id_ = job_id if db.engine.dialect.name == "postgresql" else job_id.hex
        status, started_at, worker, stage, stage_log, runs, timings, state = conn.execute(text(
            "SELECT status, started_at, worker, stage, stage_log, agent_runs, timings_ms, state FROM jobs "
            "WHERE id = :id"), {"id": id_}).one()
    return (status, started_at is not None, worker, stage, [e["stage"] for e in _json(stage_log) or []],
            [r["agent_id"] for r in _json(runs) or []], _json(timings), state is not None)


def _trail(db: Database) -> list:
    """The same reports in order, each with its answer and the row after it."""
    job_id, state = _job(db)
    store = JobStore(db)
    trail: list = []

    def report(stage: str, node: str | None, with_state: bool, keep_state: bool = False) -> None:
        set_worker_node(node)
        try:
            answered = store.progress(str(job_id), stage, state if with_state else None, keep_state=keep_state)
        finally:
            set_worker_node(None)
        trail.append((stage, answered, _row(db, job_id)))

    report("pre_search:a", "w1@host", with_state=False)  # queued becomes running, the node and the stage logged
    state.agent_runs.append(AgentRun(agent_id="a", stage=Stage.PRE_SEARCH, success=True, status="ok"))
    state.timings_ms["pre_search"] = 1.5
    report("pre_search:a", None, with_state=True)  # the same stage: logged once, the node kept, the records written
    report("core_search", "w2@host", with_state=True)  # another stage and node
    report("response", None, with_state=True, keep_state=True)  # the state kept too
    store.cancel(str(job_id))
    report("assemble", "w1@host", with_state=True)  # an ended job: refused, the row unchanged
    return trail


def test_the_same_reports_leave_the_same_row_on_postgresql_and_sqlite(database, migrated_db):  # noqa: F811
    on_postgresql, on_sqlite = _trail(database), _trail(migrated_db)
    assert on_postgresql == on_sqlite
    # And the rule itself, read on one of them: the stage log grows only when the stage changes, a report without a
    # node keeps the last one, and a cancelled job refuses the report.
    assert [answered for _, answered, _ in on_sqlite] == [True, True, True, True, False]
    assert on_sqlite[-1][2] == ("cancelled", True, "w2@host", "response", ["pre_search:a", "core_search", "response"],
                                ["a"], {"pre_search": 1.5}, True)
