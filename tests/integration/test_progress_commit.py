"""A progress report on PostgreSQL: one statement that does not wait for the WAL flush, refuses an ended job and
survives a connection broken since its last use; the state kept for ``assemble`` is committed durably."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import event, text

from agentsearch.pipeline.agents.base import Stage
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.job_store import JobStore, set_worker_node
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID
from agentsearch.pipeline.records.agent_runs import AgentRun
from tests.support.databases import migrated_database

pytestmark = pytest.mark.integration


@pytest.fixture
def database():
    with migrated_database("progress") as db:
        yield db


def _job(database, status: str = "queued") -> tuple[uuid.UUID, JobState]:
    collection_id, job_id = uuid.uuid4(), uuid.uuid4()
    with database.session() as s:
        s.add(CollectionRow(id=collection_id, user_id=DEFAULT_USER_ID, name=f"c-{job_id.hex[:8]}", embedding_model="m"))
        s.flush()
        s.add(JobRow(id=job_id, user_id=DEFAULT_USER_ID, collection_id=collection_id, query="q", status=status,
                  request={}, config_snapshot=[]))
    return job_id, JobState(job_id=str(job_id), collection_id=str(collection_id), query="q")


def _statements(engine) -> list[str]:
    sent: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda conn, cursor, statement, *args: sent.append(statement))
    return sent


def test_progress_is_one_statement_that_commits_without_waiting_for_the_disk_but_a_kept_state_waits(database):
    job_id, state = _job(database)
    store = JobStore(database)
    assert store.progress(str(job_id), "pre_search:a", state)  # the progress engine connects (and is set up)
    progress_sent, durable_sent = _statements(database.progress_engine), _statements(database.engine)
    transactions: list[int] = []
    event.listen(database.engine, "begin", lambda conn: transactions.append(1))

    assert store.progress(str(job_id), "pre_search:b", state)
    assert [s.split()[0] for s in progress_sent] == ["UPDATE"] and "RETURNING" in progress_sent[0]
    assert not durable_sent
    assert store.progress(str(job_id), "response", state, keep_state=True)
    assert [s.split()[0] for s in durable_sent] == ["UPDATE"] and transactions == [1]

    with database.progress_engine.connect() as conn:
        assert conn.execute(text("SHOW synchronous_commit")).scalar() == "off"
    with database.session() as s:
        # Only progress connections skip the wait: every other write commits durably.
        assert s.execute(text("SHOW synchronous_commit")).scalar() == "on"
        job = s.get(JobRow, job_id)
        assert (job.status, job.stage, job.state["job_id"]) == ("running", "response", str(job_id))


def test_progress_starts_the_job_logs_each_stage_once_and_keeps_the_records(database):
    job_id, state = _job(database)
    store = JobStore(database)
    set_worker_node("w1@host")
    try:
        assert store.progress(str(job_id), "pre_search:a", state)
        state.agent_runs.append(AgentRun(agent_id="a", stage=Stage.PRE_SEARCH, success=True, status="ok"))
        state.timings_ms["pre_search"] = 1.5
        assert store.progress(str(job_id), "pre_search:a", state)  # the same stage again: logged once
        assert store.progress(str(job_id), "pre_search:b", state)
    finally:
        set_worker_node(None)
    with database.session() as s:
        job = s.get(JobRow, job_id)
        assert (job.status, job.stage, job.worker) == ("running", "pre_search:b", "w1@host")
        assert job.started_at is not None
        assert [e["stage"] for e in job.stage_log] == ["pre_search:a", "pre_search:b"]
        assert [r["agent_id"] for r in job.agent_runs] == ["a"] and job.timings_ms == {"pre_search": 1.5}
        started = job.started_at
    assert store.progress(str(job_id), "core_search")
    with database.session() as s:
        assert s.get(JobRow, job_id).started_at == started  # set once, when the job started


def test_progress_refuses_an_ended_job_and_lets_a_step_without_a_row_go_on(database):
    store = JobStore(database)
    job_id, state = _job(database)
    assert store.progress(str(job_id), "pre_search:a", state)
    assert store.cancel(str(job_id))
    assert not store.progress(str(job_id), "pre_search:b", state)
    for status in ("succeeded", "failed"):
        ended, ended_state = _job(database, status)
        assert not store.progress(str(ended), "pre_search:a", ended_state)
    with database.session() as s:
        job = s.get(JobRow, job_id)
        assert (job.status, job.stage) == ("cancelled", "pre_search:a")  # the refused report changed nothing
    assert store.progress(str(uuid.uuid4()), "pre_search:a", state)


def test_a_progress_connection_broken_since_its_last_use_is_replaced(database):
    job_id, state = _job(database)
    store = JobStore(database)
    assert store.progress(str(job_id), "pre_search:a", state)
    with database.progress_engine.connect() as conn:
        pid = conn.execute(text("SELECT pg_backend_pid()")).scalar()
    with database.session() as s:  # what a database restart does to the pooled connection
        assert s.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar()
    disconnects: list[bool] = []
    event.listen(database.progress_engine, "handle_error", lambda ctx: disconnects.append(ctx.is_disconnect))
    assert store.progress(str(job_id), "pre_search:b", state)
    assert disconnects == [True]  # found broken when used, then sent once more on a fresh connection
    with database.session() as s:
        assert s.get(JobRow, job_id).stage == "pre_search:b"
