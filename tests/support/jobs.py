"""Job rows for tests that run steps without the API: a queued job in its own collection, and the same job answered.

Usage::

    state = new_job(services, [SUMMARY])                    # a queued job whose snapshot holds these agents
    state = answered(services, state)                       # as generate_answer leaves it, saved for assemble
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from agentsearch.pipeline.documents import Source
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.platform.db import utcnow
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID
from agentsearch.pipeline.records.agent_runs import AgentSpec

ANSWER = "Q4 2025 revenue reached $412 million [1]."


def new_job(services, specs: list[AgentSpec]) -> JobState:
    collection_id = uuid.uuid4()
    with services.db.session() as s:
        s.add(CollectionRow(id=collection_id, user_id=DEFAULT_USER_ID, name=f"c-{collection_id.hex[:6]}",
                         embedding_model="m"))
        s.flush()
        job = JobRow(user_id=DEFAULT_USER_ID, collection_id=collection_id, query="Q4 revenue?", status="queued",
                  config_snapshot=[spec.model_dump(mode="json") for spec in specs],
                  deadline_at=utcnow() + timedelta(minutes=10))
        s.add(job)
        s.flush()
        state = JobState(job_id=str(job.id), collection_id=str(collection_id), query="Q4 revenue?",
                         original_query="Q4 revenue?")
        job.initial_state = state.dump()
    return state


def answered(services, state: JobState, answer: str = ANSWER) -> JobState:
    """The job as generate_answer leaves it: an answer, its sources, the state kept for assemble."""
    state = state.model_copy(update={"answer": answer,
                                     "sources": [Source(document_id="nw-2025-q4", title="Q4 results", score=0.9)]})
    JobStore(services.db).progress(state.job_id, "response", state, keep_state=True)
    return state
