"""Each response agent's record reaches the job's records as that agent ends (``JobStore.record_runs``), and the
job's final records keep the order they arrived in, so an event stream reading them by position sees each once.
On SQLite (embedded settings); the PostgreSQL statement is held by tests/integration/test_stage_deadlines.py."""

from __future__ import annotations

import uuid

import pytest

from agentsearch.pipeline.agents.base import Stage
from agentsearch.pipeline.job.job_store import JobStore, in_arrival_order
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID
from agentsearch.pipeline.records.agent_runs import AgentRun


@pytest.fixture
def services(tmp_path, install_services):
    import agentsearch.pipeline.services as services_module
    from tests.support.databases import migrated_sqlite

    settings = Settings(data_dir=tmp_path)
    migrated_sqlite(settings.database_url)
    services = services_module.Services(settings)
    install_services(services)
    yield services
    services.close()


def run(agent_id: str, stage: Stage = Stage.RESPONSE, **kw) -> AgentRun:
    return AgentRun(agent_id=agent_id, stage=stage, success=True, status="ok", **kw)


@pytest.fixture
def job_id(services) -> str:
    collection_id, job_id = uuid.uuid4(), uuid.uuid4()
    with services.db.session() as s:
        s.add(CollectionRow(id=collection_id, user_id=DEFAULT_USER_ID, name="c", embedding_model="m"))
        s.flush()
        s.add(JobRow(id=job_id, user_id=DEFAULT_USER_ID, collection_id=collection_id, query="q", status="running",
                  request={}, config_snapshot=[], agent_runs=[run("pre", Stage.PRE_SEARCH).model_dump(mode="json")]))
    return str(job_id)


def stored(services, job_id: str) -> list[str]:
    with services.db.session() as s:
        return [r["agent_id"] for r in s.get(JobRow, uuid.UUID(job_id)).agent_runs]


def test_records_are_added_as_agents_end_once_each_and_never_after_the_job_ended(services, job_id):
    jobs = JobStore(services.db)
    assert jobs.record_runs(job_id, [run("fast")])
    assert jobs.record_runs(job_id, [run("slow", config_id="c1"), run("standby", stood_in_for="slow")])
    assert not jobs.record_runs(job_id, [run("fast")])  # a redelivered step adds nothing twice
    assert stored(services, job_id) == ["pre", "fast", "slow", "standby"]
    # Assembly's records in the canvas's order: the stored ones keep their places, a new one goes last.
    final = [run("pre", Stage.PRE_SEARCH), run("slow", config_id="c1"), run("standby", stood_in_for="slow"),
             run("missing"), run("fast")]
    assert jobs.succeed(job_id, {"answer": "a"}, final, {})
    assert stored(services, job_id) == ["pre", "fast", "slow", "standby", "missing"]
    assert not jobs.record_runs(job_id, [run("late")])
    assert "late" not in stored(services, job_id)


def test_response_agents_ending_at_once_on_worker_threads_each_add_their_record(services, job_id):
    """The embedded mode's worker threads end a chord's agents side by side: each read-then-write of the list is
    one at a time, or two of them would each write the list without the other's record."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = JobStore(services.db)
    names = [f"agent-{i}" for i in range(12)]
    with ThreadPoolExecutor(6) as pool:
        added = list(pool.map(lambda name: jobs.record_runs(job_id, [run(name)]), names))
    assert all(added)
    assert sorted(stored(services, job_id)) == sorted(["pre", *names])


def test_in_arrival_order_without_stored_records_keeps_the_given_order():
    assert [r["agent_id"] for r in in_arrival_order(None, [run("b"), run("a")])] == ["b", "a"]
