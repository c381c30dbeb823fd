"""Artifacts of two configs of one agent get names of their own; a cancelled job stores no artifact.

Naming is pure (``agentsearch.pipeline.job.artifact_names``) and decided by the canvas; storing runs the real task
functions against a real job row (SQLite) and a Redis-API step ledger, as ``test_step_idempotency`` does.
"""

from __future__ import annotations

import uuid

import fakeredis
import pytest

from agentsearch.pipeline import services as services_module
from agentsearch.pipeline.agents.base import AgentArtifact, Stage
from agentsearch.pipeline.job.agent_call import response_step
from agentsearch.pipeline.job.artifact_names import name_ranks, numbered, rank_key
from agentsearch.pipeline.job.artifacts import ArtifactStore, JobEnded
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.job.ledger import StepLedger
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.jobs import ArtifactRow
from agentsearch.pipeline.records.agent_runs import AgentRun, AgentSpec
from agentsearch.worker import job_tasks
from agentsearch.worker.job_tasks import build_job_canvas, response_signatures
from tests.support.databases import migrated_sqlite
from tests.support.jobs import answered, new_job

SHORT = AgentSpec(agent_id="executive_summary", stage=Stage.RESPONSE, config_id="cfg-b", priority=0,
                  config={"max_points": 1})
LONG = AgentSpec(agent_id="executive_summary", stage=Stage.RESPONSE, config_id="cfg-a", priority=0,
                 config={"max_points": 5, "max_words": 300})
EMAIL = AgentSpec(agent_id="email_draft", stage=Stage.RESPONSE, config_id="cfg-e", priority=0)


@pytest.mark.parametrize("filename, rank, expected", [
    ("summary.txt", 1, "summary.txt"),
    ("summary.txt", 2, "summary-2.txt"),
    ("report.v1.pdf", 3, "report.v1-3.pdf"),
    ("notes", 2, "notes-2"),
    (".notes", 2, ".notes-2"),
])
def test_numbered_puts_the_rank_before_the_extension(filename, rank, expected):
    assert numbered(filename, rank) == expected


def test_ranks_count_within_one_agent_by_priority_then_config_id_whatever_the_order():
    later = LONG.model_copy(update={"priority": 5, "config_id": "cfg-0"})
    for specs in ([SHORT, LONG, EMAIL, later], [later, EMAIL, LONG, SHORT]):
        ranks = name_ranks(specs)
        assert (ranks[rank_key(LONG)], ranks[rank_key(SHORT)], ranks[rank_key(later)]) == (1, 2, 3)
        assert ranks[rank_key(EMAIL)] == 1


def test_the_canvas_tells_a_second_config_its_rank_and_leaves_the_first_message_as_it_was():
    steps = {s.kwargs["spec"]["config_id"]: s.kwargs for s in response_signatures([SHORT, EMAIL, LONG], 30.0)}
    assert steps["cfg-b"]["name_rank"] == 2
    assert "name_rank" not in steps["cfg-a"] and "name_rank" not in steps["cfg-e"]
    # The reaper enqueues a job again from its snapshot: the same ranks.
    chord = build_job_canvas("j", [LONG, EMAIL, SHORT]).tasks[-1]
    assert {s.kwargs["spec"]["config_id"]: s.kwargs.get("name_rank", 1) for s in chord.tasks} == \
        {"cfg-a": 1, "cfg-b": 2, "cfg-e": 1}


@pytest.fixture
def services(tmp_path, monkeypatch, install_services):
    settings = Settings(data_dir=tmp_path)
    migrated_sqlite(settings.database_url)
    services = services_module.Services(settings)
    install_services(services)
    ledger = StepLedger(fakeredis.FakeRedis(server=fakeredis.FakeServer()), ttl_s=600)
    monkeypatch.setattr(job_tasks, "step_ledger", lambda: ledger)
    yield services
    services.close()


def answered_job(services, specs: list[AgentSpec]) -> JobState:
    return answered(services, new_job(services, specs),
                    "Q4 2025 revenue reached $412 million [1]. Margins rose [1]. Storage doubled [1].")


def artifact_rows(services, job_id: str) -> dict[str, bytes]:
    with services.db.session() as s:
        return {r.filename: r.data for r in s.query(ArtifactRow).filter_by(job_id=uuid.UUID(job_id))}


def run_responders(state: JobState, specs: list[AgentSpec]) -> list[dict]:
    return [job_tasks.response_agent(state.dump(), s.kwargs["spec"], **({"name_rank": s.kwargs["name_rank"]}
                                                                     if "name_rank" in s.kwargs else {}))
            for s in response_signatures(specs, 30.0)]


def test_two_configs_of_one_agent_keep_both_artifacts_and_a_redelivery_replaces_its_own(services):
    state = answered_job(services, [SHORT, LONG])
    records = run_responders(state, [SHORT, LONG])
    assert sorted(r["artifact"]["filename"] for r in records) == ["executive_summary-2.txt", "executive_summary.txt"]
    stored = artifact_rows(services, state.job_id)
    assert set(stored) == {"executive_summary.txt", "executive_summary-2.txt"}
    assert stored["executive_summary.txt"].count(b"\n- ") == 3  # LONG (cfg-a): all three points
    assert stored["executive_summary-2.txt"].count(b"\n- ") == 1  # SHORT (cfg-b): one
    job_tasks.step_ledger().clear(state.job_id)  # the outputs died with their process: both steps run again
    run_responders(state, [SHORT, LONG])
    assert artifact_rows(services, state.job_id) == stored


class CancellingRunner:
    """A response agent during whose rendering the user cancels the job."""

    def __init__(self, jobs: JobStore, job_id: str) -> None:
        self.jobs, self.job_id = jobs, job_id

    def run(self, spec, inp, ctx):
        assert self.jobs.cancel(self.job_id)
        artifact = AgentArtifact(agent_id=spec.agent_id, type="txt", data=b"late", filename="late.txt",
                                 content_type="text/plain")
        return AgentRun(agent_id=spec.agent_id, stage=Stage.RESPONSE, success=True, status="ok"), artifact


def test_a_cancel_landing_while_an_agent_renders_wins(services):
    state = answered_job(services, [SHORT])
    jobs = JobStore(services.db)
    run = response_step(state, SHORT, CancellingRunner(jobs, state.job_id), ArtifactStore.of(services))
    assert run.status == "skipped" and run.artifact is None and "cancelled" in run.errors[0]
    assert artifact_rows(services, state.job_id) == {}
    assert jobs.status(state.job_id) == "cancelled"


def test_the_store_refuses_an_ended_job_and_a_cancel_takes_the_stored_artifacts_with_it(services):
    state = answered_job(services, [SHORT, LONG])
    artifact = AgentArtifact(agent_id="executive_summary", type="txt", data=b"x", filename="early.txt",
                             content_type="text/plain")
    ArtifactStore.of(services).save(state.job_id, artifact)
    assert set(artifact_rows(services, state.job_id)) == {"early.txt"}
    assert JobStore(services.db).cancel(state.job_id)
    assert artifact_rows(services, state.job_id) == {}  # a cancelled job keeps no artifact
    with pytest.raises(JobEnded, match="job cancelled"):
        ArtifactStore.of(services).save(state.job_id, artifact)
    finished = answered_job(services, [SHORT])
    JobStore(services.db).fail(finished.job_id, "deadline passed (reaped)")
    with pytest.raises(JobEnded, match="job failed"):
        ArtifactStore.of(services).save(finished.job_id, artifact)
