"""A step of a job that runs twice changes nothing the second time.

At-least-once delivery runs a step again when its process dies before the message is acknowledged, and the reaper
enqueues a whole job again when its node dies. These tests run the real task functions twice (as a redelivery
would) against a real job row and a Redis-API step ledger.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import agentsearch_idempotency_agents as counted
import fakeredis
import pytest
import redis
from celery.exceptions import Retry
from sqlalchemy.exc import OperationalError

from agentsearch.pipeline import services as services_module
from agentsearch.pipeline.agents.base import Stage
from agentsearch.pipeline.job import workflow
from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.job.ledger import StepLedger
from agentsearch.pipeline.platform.db import utcnow
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.jobs import ArtifactRow, JobRow
from agentsearch.pipeline.records.agent_runs import AgentSpec
from agentsearch.worker import job_tasks
from tests.support.databases import migrated_sqlite
from tests.support.jobs import answered, new_job

REWRITER = AgentSpec(agent_id="counted_rewriter", stage=Stage.PRE_SEARCH, priority=0)
NOTE = AgentSpec(agent_id="counted_note", stage=Stage.RESPONSE, priority=0)
SUMMARY = AgentSpec(agent_id="executive_summary", stage=Stage.RESPONSE, priority=10)


@pytest.fixture
def services(tmp_path, monkeypatch, install_services):
    settings = Settings(data_dir=tmp_path, agent_modules=["agentsearch_idempotency_agents"])
    migrated_sqlite(settings.database_url)
    services = services_module.Services(settings)
    install_services(services)
    ledger = StepLedger(fakeredis.FakeRedis(server=fakeredis.FakeServer()), ttl_s=600)
    monkeypatch.setattr(job_tasks, "step_ledger", lambda: ledger)
    counted.CALLS.clear()
    yield services
    services.close()


def job_row(services, job_id: str) -> JobRow:
    with services.db.session() as s:
        return s.get(JobRow, uuid.UUID(job_id))


def test_an_agent_step_run_twice_calls_its_agent_once_and_hands_on_the_same_state(services):
    state = new_job(services, [REWRITER])
    spec = REWRITER.model_dump(mode="json")
    first = job_tasks.pre_search_agent(state.dump(), spec)
    again = job_tasks.pre_search_agent(state.dump(), spec)  # the redelivered message
    assert counted.CALLS == ["counted_rewriter"]
    assert again == first and first["query"] == "Q4 revenue? rewritten1"


def test_a_job_enqueued_again_resumes_after_the_steps_it_finished(services):
    state = new_job(services, [REWRITER])
    job_tasks.pre_search_agent(state.dump(), REWRITER.model_dump(mode="json"))
    initial, snapshot = JobStore(services.db).initial_state(state.job_id)  # what the reaper enqueues again
    resumed = job_tasks.pre_search_agent(initial.dump(), snapshot[0])
    assert counted.CALLS == ["counted_rewriter"] and resumed["query"] == "Q4 revenue? rewritten1"


def test_a_response_agent_run_twice_makes_one_artifact_and_returns_the_same_record(services):
    state = answered(services, new_job(services, [NOTE]))
    first = job_tasks.response_agent(state.dump(), NOTE.model_dump(mode="json"))
    again = job_tasks.response_agent(state.dump(), NOTE.model_dump(mode="json"))
    assert counted.CALLS == ["counted_note"]
    assert again == first and first["status"] == "ok"
    with services.db.session() as s:
        assert s.query(ArtifactRow).filter_by(job_id=uuid.UUID(state.job_id)).count() == 1


def test_assemble_run_twice_ends_the_job_once(services):
    state = answered(services, new_job(services, [NOTE]))
    record = job_tasks.response_agent(state.dump(), NOTE.model_dump(mode="json"))
    assert job_tasks.assemble([record], state.job_id) == {"job_id": state.job_id, "status": "succeeded"}
    first = job_row(services, state.job_id)
    assert job_tasks.assemble([record], state.job_id) == {"job_id": state.job_id, "status": "succeeded"}
    again = job_row(services, state.job_id)
    assert again.status == "succeeded" and again.finished_at == first.finished_at
    assert again.response == first.response
    assert [e["stage"] for e in again.stage_log].count("done") == 1
    assert [a["agent_id"] for a in again.response["agents"]] == ["counted_note"]


def test_assemble_counts_each_response_agent_once_when_the_chord_brought_a_duplicate(services):
    state = answered(services, new_job(services, [NOTE, SUMMARY]))
    note = job_tasks.response_agent(state.dump(), NOTE.model_dump(mode="json"))
    job_tasks.response_agent(state.dump(), SUMMARY.model_dump(mode="json"))
    # The shape a result backend that counted a redelivered header task twice hands the callback: one record
    # twice, the other agent's missing. The stored records decide.
    job_tasks.assemble([note, note], state.job_id)
    job = job_row(services, state.job_id)
    assert job.status == "succeeded"
    assert [a["agent_id"] for a in job.response["agents"]] == ["counted_note", "executive_summary"]
    assert sorted(a["agent_id"] for a in job.response["agent_artifacts"]) == ["counted_note", "executive_summary"]


def test_assemble_waits_for_a_record_that_is_nowhere_yet(services):
    state = answered(services, new_job(services, [NOTE, SUMMARY]))
    note = job_tasks.response_agent(state.dump(), NOTE.model_dump(mode="json"))
    with pytest.raises(Retry):
        job_tasks.assemble([note, note], state.job_id)
    assert job_row(services, state.job_id).status == "running"


def test_a_late_response_agent_copy_does_nothing_once_the_job_ended(services):
    state = answered(services, new_job(services, [NOTE]))
    JobStore(services.db).fail(state.job_id, "deadline passed (reaped)")
    record = job_tasks.response_agent(state.dump(), NOTE.model_dump(mode="json"))
    assert record["status"] == "skipped" and counted.CALLS == []


class _DownRedis:
    def __getattr__(self, name):
        def fail(*_a, **_k):
            raise redis.ConnectionError("Redis is restarting")
        return fail


def test_the_ledger_keeps_the_first_output_and_steps_aside_when_redis_is_down():
    ledger = StepLedger(fakeredis.FakeRedis(), ttl_s=60)
    assert ledger.put("j", "answer", {"answer": "first"}) == {"answer": "first"}
    assert ledger.put("j", "answer", {"answer": "second"}) == {"answer": "first"}
    assert ledger.get("j", "answer") == {"answer": "first"} and ledger.get("j", "other") is None
    ledger.clear("j")
    assert ledger.steps("j") == {}
    down = StepLedger(_DownRedis(), ttl_s=60)  # at-least-once, as without a ledger: the step just runs
    assert down.get("j", "answer") is None and down.put("j", "answer", {"a": 1}) == {"a": 1}


def test_reaper_retries_a_job_whose_response_agent_died_with_its_node(services):
    state = answered(services, new_job(services, [NOTE]))
    jobs = JobStore(services.db)
    with services.db.session() as s:
        job = s.get(JobRow, uuid.UUID(state.job_id))
        job.worker, job.task_ids = "w-alive@host", ["t-answer", "t-note"]
        job.updated_at = utcnow() - timedelta(minutes=5)
    later = utcnow()
    # The node that made the answer is alive; the one running the response agent is not.
    started_on = {"t-note": "w-gone@host"}
    untouched = jobs.reap(now=later, alive_nodes={"w-alive@host", "w-gone@host"},
                          task_nodes=lambda ids: {started_on[t] for t in ids if t in started_on})
    assert untouched.retried == [] and untouched.failed == []
    result = jobs.reap(now=later, alive_nodes={"w-alive@host"},
                       task_nodes=lambda ids: {started_on[t] for t in ids if t in started_on})
    assert result.retried == [state.job_id]
    job = job_row(services, state.job_id)
    assert job.status == "queued" and job.attempts == 2
    assert job.stage_log[-1]["reason"] == "worker lost in stage response (w-gone@host)"


class _FlakyStore:
    def __init__(self, failures: int) -> None:
        self.failures, self.calls = failures, 0

    def save(self, job_id, artifact):
        self.calls += 1
        if self.calls <= self.failures:
            raise OperationalError("INSERT", {}, ConnectionError("server closed the connection"))
        return "ref"


def test_a_finished_artifact_waits_for_the_database_instead_of_being_lost():
    store = _FlakyStore(failures=2)
    assert workflow.RetryingArtifacts(store, wait_s=5).save("j", object()) == "ref" and store.calls == 3
    gone = _FlakyStore(failures=100)
    with pytest.raises(OperationalError):
        # Room for the first retry, 0.5 s on (with 0.9 s to spare), never for the second, 1 s after that.
        workflow.RetryingArtifacts(gone, wait_s=1.4).save("j", object())
    assert gone.calls == 2
