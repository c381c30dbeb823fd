"""A late task of a job whose saved state is not there ends quietly: a warning names the job and why, a job still
going fails with that reason, and nothing is raised (``agentsearch.worker.missing_state``). The real task functions run
against job rows in SQLite."""

from __future__ import annotations

import logging
import uuid

import pytest

from agentsearch.pipeline import services as services_module
from agentsearch.pipeline.agentic.config import IterativeConfig
from agentsearch.pipeline.agentic.loop import LoopState
from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.worker import agentic_tasks, job_tasks
from tests.support.databases import migrated_sqlite
from tests.support.jobs import new_job


@pytest.fixture
def services(tmp_path, install_services):
    settings = Settings(data_dir=tmp_path)
    migrated_sqlite(settings.database_url)
    services = install_services(services_module.Services(settings))
    yield services
    services.close()


def _late_tasks(job_id: str) -> dict[str, dict]:
    """Each task that loads the job's saved state, run as a late message of the job would run it."""
    loop = LoopState.start("Q4 revenue?", IterativeConfig()).dump()
    return {"agentic_iteration": agentic_tasks.agentic_iteration(job_id, "", loop),
            "agentic_finish": agentic_tasks.agentic_finish(job_id),
            "assemble": job_tasks.assemble([], job_id)}


def test_a_job_deleted_with_its_collection_ends_its_late_tasks_with_the_reason_logged(services, caplog):
    state = new_job(services, [])
    with services.db.session() as s:  # the job goes with it
        s.delete(s.get(CollectionRow, uuid.UUID(state.collection_id)))
    with caplog.at_level(logging.WARNING, logger="agentsearch.worker"):
        ended = _late_tasks(state.job_id)
    for task, outcome in ended.items():
        assert outcome["status"] == "gone" and outcome["job_id"] == state.job_id, task
        assert "the job is gone" in outcome["reason"], task
        assert any(r.name == "agentsearch.worker" and r.levelno == logging.WARNING and task in r.getMessage()
                   and state.job_id in r.getMessage() and "the job is gone" in r.getMessage()
                   for r in caplog.records), task


def test_a_job_going_without_a_saved_state_fails_with_why_instead_of_waiting_for_its_deadline(services):
    state = new_job(services, [])
    JobStore(services.db).progress(state.job_id, "response")  # running, no state kept
    outcome = agentic_tasks.agentic_finish(state.job_id)
    assert outcome["status"] == "gone" and "the job is running and never saved one" in outcome["reason"]
    with services.db.session() as s:
        job = s.get(JobRow, uuid.UUID(state.job_id))
        assert job.status == "failed"
        assert job.error == "agentic_finish: it has no saved state: the job is running and never saved one"
    # A task after it finds the job ended, and leaves it as it ended.
    assert job_tasks.assemble([], state.job_id) == {"job_id": state.job_id, "status": "failed"}
