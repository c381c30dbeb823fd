"""The state that travels between a job's tasks: small, versioned and JSON-serialisable.

It holds the query, metadata, documents, answer and the record of every agent call
(``agentsearch.pipeline.records.agent_runs``); never ORM objects, clients or artifact bytes (artifacts travel as
``ArtifactRef`` claim checks).

Usage::

    state = JobState(job_id="j1", collection_id="c1", query="solar output 2025")
    payload = state.dump()                   # plain dict, what Celery carries
    state = JobState.load(payload)           # refuses an unknown schema version
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, Field

from agentsearch.pipeline.agents.base import Stage
from agentsearch.pipeline.documents import Citation, CotStep, Document, Source
from agentsearch.pipeline.records.agent_runs import AgentRun

STATE_VERSION: Final = 1


class JobState(BaseModel):
    schema_version: Literal[1] = STATE_VERSION
    job_id: str
    collection_id: str
    user_id: str | None = None
    query: str
    original_query: str | None = None
    top_k: int = 5
    cot: bool = False
    search: dict[str, Any] = Field(default_factory=dict, description="SearchConfig overrides for this job.")
    collections: dict[str, int] = Field(
        default_factory=dict, description="Every collection the job searches, with its index epoch at submission."
    )
    metadata: dict[str, Any] = Field(default_factory=dict)
    skip_search: bool = False
    documents: list[Document] = Field(default_factory=list)
    answer: str | None = None
    sources: list[Source] = Field(default_factory=list)
    cot_steps: list[CotStep] = Field(default_factory=list)
    citations: list[Citation] = Field(
        default_factory=list, description="Each cited answer sentence checked against its source "
        "(agentsearch.pipeline.job.answer.citations)."
    )
    agent_runs: list[AgentRun] = Field(default_factory=list)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    # Optional with a default, so schema 1 stays: states written before it load, and older workers ignore it.
    agentic: dict[str, Any] | None = Field(
        None, description="Iterative mode and profiles (agentsearch.pipeline.agentic.spec.AgenticSpec); "
        "None: the single pass."
    )
    traceparent: str | None = Field(
        None, description="W3C trace context of the job's trace; stage spans are its children (observability.tracing)."
    )
    conversation_id: str | None = Field(None, description="The conversation the job asks in (its turn is recorded).")
    stage_timeouts: dict[str, float] | None = Field(
        None, description="Seconds each stage may take (pre_search, post_search, response): the collection's, "
        "overridden by the request's (agentsearch.pipeline.job.stage_budget)."
    )
    stage_clock: dict[str, float] = Field(
        default_factory=dict, description="When each budgeted stage's clock started (Unix time): the moment the "
        "step before it handed the job over."
    )
    routes: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per stage, the agent an earlier agent of it named to run next "
        "(agentsearch.pipeline.job.routing): the agents before it are passed over."
    )
    history: list[dict[str, str]] | None = Field(
        None, description="The earlier messages the job's question follows ({role, content}, oldest first): the "
        "conversation's turns or the request's own history; agents read it as AgentContext.conversation_history."
    )
    access_tokens: list[str] | None = Field(
        None, description="The document groups the job's user held at submission, as tokens (team id:group; "
        "agentsearch.pipeline.security.document_access): agents read collections as their holder; None for a user of "
        "no team."
    )

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def load(cls, payload: dict[str, Any]) -> JobState:
        return cls.model_validate(payload)

    def runs_in(self, stage: Stage) -> list[AgentRun]:
        return [r for r in self.agent_runs if r.stage == stage]
