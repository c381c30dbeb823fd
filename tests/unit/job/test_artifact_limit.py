"""An artifact over the size limit is refused with a clear error, recorded on its agent; the job goes on."""

from __future__ import annotations

import fakeredis
import pytest

from agentsearch.pipeline.agents.base import AgentArtifact, Source, Stage
from agentsearch.pipeline.agents.registry import AgentRegistry
from agentsearch.pipeline.agents.runner import AgentRunner
from agentsearch.pipeline.job.agent_call import response_step
from agentsearch.pipeline.job.artifacts import ArtifactStore, ArtifactTooLarge
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.platform.db import Database
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.records.agent_runs import AgentSpec
from tests.support.databases import migrated_sqlite

JOB_ID = "7f1d2c3b-0000-4000-8000-000000000001"


@pytest.fixture
def store(tmp_path):
    settings = Settings(data_dir=tmp_path)
    migrated_sqlite(settings.database_url)
    db = Database(settings.database_url)
    yield ArtifactStore(db, max_bytes=200)
    db.dispose()


def test_store_refuses_an_artifact_over_the_limit_naming_sizes(store):
    big = AgentArtifact(agent_id="x", type="txt", data=b"a" * 201, filename="big.txt", content_type="text/plain")
    with pytest.raises(ArtifactTooLarge, match=r"'big.txt' is 201 bytes, over the limit of 200 bytes"):
        store.save(JOB_ID, big)


def test_response_step_records_the_refusal_on_the_agent(store, tmp_path):
    runner = AgentRunner(AgentRegistry.discover(), fakeredis.FakeRedis(), Settings(data_dir=tmp_path))
    state = JobState(
        job_id=JOB_ID, collection_id="c5d1e7a2-0000-4000-8000-000000000002", query="Q4 2025 revenue?",
        answer=" ".join(["Q4 2025 revenue reached $412 million [1]."] * 20),
        sources=[Source(document_id="nw-2025-q4", title="Q4 results", score=0.9)],
    )
    run = response_step(state, AgentSpec(agent_id="executive_summary", stage=Stage.RESPONSE), runner, store)
    assert run.status == "error" and run.artifact is None
    assert "over the limit of 200 bytes" in run.errors[0]
