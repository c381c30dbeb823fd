"""Request and response bodies of the HTTP API.

The body of ``POST /v1/search`` is ``agentsearch.pipeline.job.request.SearchRequest``: what the job's submit
(``agentsearch.pipeline.job.submit``) checks and keeps with the job.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentsearch.pipeline.agents.base import Stage
from agentsearch.pipeline.documents import Citation
from agentsearch.pipeline.ingestion.documents_in import DocumentIn
from agentsearch.pipeline.ingestion.progress import IngestionProgress
from agentsearch.pipeline.job.stage_budget import StageTimeouts


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CollectionCreate(Strict):
    name: str = Field(min_length=1, max_length=255, pattern=r"^[\w .-]+$")
    description: str | None = Field(None, max_length=5000)
    stage_timeouts: StageTimeouts | None = Field(
        None, description="Seconds per stage for this collection's jobs (docs/stage-deadlines.md).")
    team_id: uuid.UUID | None = Field(None, description="A team of yours (as its admin): the collection is the "
                                                        "team's, reached by its members by their role.")


class CollectionUpdate(Strict):
    stage_timeouts: StageTimeouts | None = Field(
        description="Seconds per stage for this collection's jobs; null removes them (docs/stage-deadlines.md).")


class CollectionOut(BaseModel):
    id: uuid.UUID
    name: str
    description: str | None
    embedding_model: str
    index_epoch: int
    documents: dict[str, int]
    created_at: datetime
    stage_timeouts: dict[str, float] | None = None
    ingestion: IngestionProgress = Field(
        default_factory=IngestionProgress, description="The current ingestion: documents and chunks done, the rate "
        "and the time left (docs/documents.md, \"Progress\")."
    )
    team_id: uuid.UUID | None = Field(None, description="The team whose collection it is; null: personal.")
    team: str | None = Field(None, description="The team's name.")
    role: str | None = Field(None, description="The caller's role over it: owner (personal), admin, editor, viewer.")


class DocumentsIn(Strict):
    documents: list[DocumentIn] = Field(min_length=1, max_length=1000)


class DocumentsAccepted(BaseModel):
    collection_id: uuid.UUID
    accepted: int
    task_id: str | None = Field(description="The first of task_ids (kept for clients of one task per request).")
    task_ids: list[str] = Field(default_factory=list, description="The ingest tasks the documents were sent as, at "
                                "most ingest_task_documents each, which the ingest workers share.")


class FilesAccepted(DocumentsAccepted):
    """An upload of files: the documents of the files taken (each parsed by a worker next; the documents listing
    shows its progress and outcome), and the files refused with the reason, of which nothing was stored."""

    documents: list[dict[str, str]] = Field(default_factory=list, description='[{"id", "file", "format"}]')
    rejected: list[dict[str, str]] = Field(default_factory=list, description='[{"file", "error"}]')


class AgentConfigCreate(Strict):
    agent_id: str = Field(min_length=1, max_length=100)
    name: str | None = Field(None, max_length=255)
    description: str | None = Field(None, max_length=5000)
    config: dict[str, Any] = Field(default_factory=dict)
    enabled: bool = True
    priority: int = Field(0, ge=-10_000, le=10_000)
    trigger_stage: Stage | None = Field(None, description="Optional; must match the agent's own stage.")
    timeout_s: float | None = Field(None, gt=0, le=3600)
    cache_ttl_s: int | None = Field(None, ge=0, le=30 * 86400)
    breaker_fail_max: int | None = Field(None, ge=1, le=1000)
    breaker_reset_timeout_s: float | None = Field(None, ge=1, le=86400, description="Whole seconds count.")


class AgentConfigOut(BaseModel):
    id: uuid.UUID
    agent_id: str
    name: str
    description: str | None
    config: dict[str, Any]
    enabled: bool
    trigger_stage: Stage
    priority: int
    timeout_s: float | None
    cache_ttl_s: int | None
    breaker_fail_max: int | None
    breaker_reset_timeout_s: float | None


class CollectionAgentIn(Strict):
    agent_config_id: uuid.UUID
    priority: int | None = Field(None, ge=-10_000, le=10_000)
    enabled: bool = True
    fallback_agent_config_id: uuid.UUID | None = Field(
        None, description="The caller's agent config of the same stage that runs in this one's place, with the same "
        "input, when this one ends in error, timeout or an open circuit (one level: its own fallback is not run).")
    critical: bool = Field(False, description="Fail the job when this agent (and its fallback, if any) fails.")


class CollectionAgentsIn(Strict):
    agents: list[CollectionAgentIn] = Field(max_length=100)


class ProfileSetCreate(Strict):
    name: str = Field(min_length=1, max_length=255)
    collection_id: uuid.UUID = Field(description="Searched by profiles that name no collections of their own.")
    query: str = Field("", max_length=2000, description="Fills {query} in the profiles' templates.")
    profiles: list[dict[str, Any]] = Field(min_length=1, max_length=10,
                                           description="Validated as agentsearch.pipeline.agentic.profiles.Profile.")
    iterative: dict[str, Any] | None = Field(None, description="IterativeConfig overrides for every profile.")
    seen: dict[str, Any] | None = Field(None, description="Seen-content policy (on by default).")
    agents: list[Any] | None = Field(None, max_length=10, description="The briefing: response agents each run ends "
                                     "with, [{agent_id, config?}] (pdf_report, email_draft, ...).")
    schedule_s: float | None = Field(None, ge=60, le=30 * 86400, description="Run every this many seconds.")
    enabled: bool = True


WebhookEvent = Literal["job.succeeded", "job.failed", "job.cancelled", "job.stale"]


def _distinct_events(events: list[str] | None) -> list[str] | None:
    if events is not None and len(set(events)) != len(events):
        raise ValueError("an event is listed twice")
    return events


class WebhookCreate(Strict):
    url: str = Field(min_length=1, max_length=2048, description="http:// or https://; a public host unless the "
                                                                 "operator allowed it (AGENTSEARCH_EGRESS_ALLOW).")
    events: list[WebhookEvent] = Field(min_length=1, max_length=4)
    description: str = Field("", max_length=1000)
    collection_id: uuid.UUID | None = Field(None, description="Hear of every job over this collection (a team's: "
                                                              "any member's; needs editor); null: your own jobs.")

    _events = field_validator("events")(_distinct_events)


class WebhookUpdate(Strict):
    url: str | None = Field(None, min_length=1, max_length=2048)
    events: list[WebhookEvent] | None = Field(None, min_length=1, max_length=4)
    description: str | None = Field(None, max_length=1000)
    enabled: bool | None = Field(None, description="false: disabled; true: active again (also after failing).")

    _events = field_validator("events")(_distinct_events)


class JobResponseOut(BaseModel):
    """A finished job's response (``agentsearch.pipeline.job.assembly.job_response``): the answer, its sources and the
    check of its citations; the other fields (agents, artifacts, metadata, timings) pass through as stored."""

    model_config = ConfigDict(extra="allow")
    answer: str | None = None
    sources: list[dict[str, Any]] = Field(default_factory=list)
    citations: list[Citation] = Field(
        default_factory=list, description="Each answer sentence that cites [n], checked against source n's text: "
        "span (offsets into that source's text) and status (docs/citations.md). Empty for a job finished before "
        "citations were checked.")


class JobOut(BaseModel):
    """A job as ``GET /v1/jobs/{id}`` shows it; ``response`` once it has one."""

    model_config = ConfigDict(extra="allow")
    job_id: str
    status: str
    stale: dict[str, Literal["changed", "deleted"]] | None = Field(
        None, description="The cited documents changed or deleted since the answer read them, by document id "
        "(docs/answers.md); null while none has.")
    response: JobResponseOut | None = None


class FeedbackCreate(Strict):
    rating: Literal["up", "down"]
    comment: str | None = Field(None, max_length=2000, description="What was right or wrong with it.")
    source: str | None = Field(None, min_length=1, max_length=512,
                               description="Rate this source of the answer (its document_id) instead of the answer.")


class EvalSetCreate(Strict):
    size: int | None = Field(None, ge=1, le=500, description="Questions to make (default AGENTSEARCH_EVAL_SET_SIZE).")
    llm: bool = Field(True, description="Have the configured LLM write the questions (checked offline); without "
                                        "one, or false, the offline cloze method makes them.")
    seed: int = Field(0, ge=0, description="The draw of passages: the same seed draws the same documents.")


class EvalQuestionCreate(Strict):
    question: str | None = Field(None, min_length=3, max_length=2000, description="Required unless ``job_id``.")
    answer: str = Field(min_length=1, max_length=500, description="A span of the document's text (case aside).")
    document_id: str = Field(min_length=1, max_length=512, description="The correct source.")
    job_id: uuid.UUID | None = Field(None, description="A job of this collection whose answer was rated down: its "
                                                       "question is the one added, with the correct source.")


class SearchSettingsIn(Strict):
    search: dict[str, Any] = Field(description="SearchConfig fields (strategy, fusion, weights, ...) and top_k, for "
                                               "the collection's jobs; {} returns to the service's defaults.")


class ToleranceIn(Strict):
    tolerance: float | None = Field(ge=0.0, le=1.0, description="How far a figure may fall under a staged change; "
                                                                "null: the service's default.")
