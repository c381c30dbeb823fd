"""A job step's progress report: one database write per agent step, carrying the records of the steps before it.

The tasks are called in-process on SQLite (embedded settings), the way a worker calls them.
"""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import event

from agentsearch.pipeline.agents.base import Stage
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID
from agentsearch.pipeline.records.agent_runs import AgentSpec


@pytest.fixture
def services(tmp_path, install_services):
    import agentsearch.pipeline.services as services_module
    from tests.support.databases import migrated_sqlite

    settings = Settings(data_dir=tmp_path, agent_modules=["agentsearch_test_agents"])
    migrated_sqlite(settings.database_url)
    services = services_module.Services(settings)
    install_services(services)
    yield services
    services.close()


@pytest.fixture
def job(services) -> JobState:
    collection_id, job_id = uuid.uuid4(), uuid.uuid4()
    state = JobState(job_id=str(job_id), collection_id=str(collection_id), query="solar output 2024")
    with services.db.session() as s:
        s.add(CollectionRow(id=collection_id, user_id=DEFAULT_USER_ID, name="c", embedding_model="m"))
        s.flush()
        s.add(JobRow(id=job_id, user_id=DEFAULT_USER_ID, collection_id=collection_id, query=state.query,
                  status="queued", request={}, config_snapshot=[], initial_state=state.dump()))
    return state


def row(services, job_id: str) -> JobRow:
    with services.db.session() as s:
        return s.get(JobRow, uuid.UUID(job_id))


def spec(agent_id: str, stage: Stage) -> dict:
    return AgentSpec(agent_id=agent_id, stage=stage).model_dump(mode="json")


def test_an_agent_step_writes_once_and_its_record_arrives_with_the_next_step(services, job, monkeypatch):
    from agentsearch.worker.job_tasks import post_search_agent, pre_search_agent, write_answer

    commits = []
    for engine in (services.db.engine, services.db.progress_engine):
        event.listen(engine, "commit", lambda conn: commits.append(1))

    after_pre = pre_search_agent(job.dump(), spec("year_scoper", Stage.PRE_SEARCH))
    assert len(commits) == 1
    first = row(services, job.job_id)
    assert (first.status, first.stage, first.agent_runs) == ("running", "pre_search:year_scoper", [])
    assert [r.agent_id for r in JobState.load(after_pre).agent_runs] == ["year_scoper"]

    commits.clear()
    after_post = post_search_agent(after_pre, spec("top_trimmer", Stage.POST_SEARCH))
    assert len(commits) == 1
    second = row(services, job.job_id)
    assert second.stage == "post_search:top_trimmer"
    assert [r["agent_id"] for r in second.agent_runs] == ["year_scoper"]  # the record handed to this step

    write_answer(after_post)
    final = row(services, job.job_id)
    assert [r["agent_id"] for r in final.agent_runs] == ["year_scoper", "top_trimmer"]
    assert JobState.load(final.state).timings_ms.keys() >= {"pre_search", "post_search", "answer"}


def test_a_step_of_a_cancelled_job_does_no_work(services, job):
    from agentsearch.worker.job_tasks import pre_search_agent

    assert JobStore(services.db).cancel(job.job_id)
    out = pre_search_agent(job.dump(), spec("year_scoper", Stage.PRE_SEARCH))
    assert out == job.dump()
    assert row(services, job.job_id).status == "cancelled"


def test_progress_waits_for_the_disk_only_where_it_must(services, job):
    """A progress report commits without waiting for the disk (SQLite: ``synchronous=NORMAL`` on the progress
    engine, which WAL keeps consistent); a kept state, what assemble builds the response from, waits (FULL)."""
    sent: dict[str, list[str]] = {"engine": [], "progress_engine": []}
    for name in sent:
        event.listen(getattr(services.db, name), "before_cursor_execute",
                     lambda conn, cursor, statement, *args, name=name: sent[name].append(statement))
    store = JobStore(services.db)
    store.progress(job.job_id, "core_search", job)
    store.progress(job.job_id, "response", job, keep_state=True)
    updates = {name: [s for s in statements if s.lstrip().startswith("UPDATE jobs")] for name, statements in
               sent.items()}
    assert len(updates["progress_engine"]) == 1 and "state =" not in updates["progress_engine"][0]
    assert len(updates["engine"]) == 1 and "state =" in updates["engine"][0]
    assert not [s for s in sent["progress_engine"] if "synchronous_commit" in s]  # PostgreSQL's setting
    with services.db.progress_engine.connect() as fast, services.db.engine.connect() as durable:
        # SQLite's numbers: 1 is NORMAL (the WAL is written, not synced, at a commit), 2 is FULL.
        assert fast.exec_driver_sql("PRAGMA synchronous").scalar() == 1
        assert durable.exec_driver_sql("PRAGMA synchronous").scalar() == 2


def test_a_report_starts_the_job_grows_the_stage_log_once_per_stage_and_keeps_the_state_when_asked(services, job):
    store = JobStore(services.db)
    assert store.progress(job.job_id, "pre_search:a", job)
    started = row(services, job.job_id)
    assert (started.status, started.stage) == ("running", "pre_search:a")
    assert started.started_at is not None and started.state is None
    assert [e["stage"] for e in started.stage_log] == ["pre_search:a"]

    job.timings_ms["pre_search"] = 12.5
    assert store.progress(job.job_id, "pre_search:a", job)  # the same stage again: a redelivered step
    assert store.progress(job.job_id, "core_search", job, keep_state=True)
    later = row(services, job.job_id)
    assert [e["stage"] for e in later.stage_log] == ["pre_search:a", "core_search"]
    assert later.started_at == started.started_at  # started once
    assert later.timings_ms == {"pre_search": 12.5}
    assert JobState.load(later.state).query == job.query


def test_a_report_to_an_ended_job_says_stop_and_one_without_a_row_goes_on(services, job):
    store = JobStore(services.db)
    assert store.cancel(job.job_id)
    assert store.progress(job.job_id, "core_search", job) is False
    ended = row(services, job.job_id)
    assert ended.status == "cancelled" and ended.stage != "core_search"
    assert store.progress(str(uuid.uuid4()), "core_search", job) is True  # a step run on its own
