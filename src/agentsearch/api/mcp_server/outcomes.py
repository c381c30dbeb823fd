"""What the MCP tools answer: the API's views cut to what a model reads (an answer, its sources, links), typed so
the SDK publishes each tool's output schema.

A job's artifacts come as links, not inlined: the API's job view carries them base64-encoded, which would put
megabytes of slides or audio into a model's context. A link needs the same API key to download.

Usage::

    outcome = job_outcome(api.job_view, base_url="https://search.example.org")
    outcome.answer, outcome.sources, outcome.artifacts[0].url
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from agentsearch.pipeline.records.job_response import InlinedArtifact, JobResponse

TERMINAL = ("succeeded", "failed", "cancelled")


class SourceOut(BaseModel):
    document_id: str
    title: str
    score: float


class ArtifactLink(BaseModel):
    agent_id: str
    type: str
    filename: str
    content_type: str
    size: int
    url: str = Field(description="Download with the same API key (Authorization: Bearer or X-API-Key).")


class JobOutcome(BaseModel):
    job_id: str
    status: str = Field(description="queued, running, succeeded, failed or cancelled.")
    finished: bool = Field(description="False: the job still runs; call get_job with job_id later.")
    query: str | None = None
    answer: str | None = None
    sources: list[SourceOut] = Field(default_factory=list, description="The documents the answer cites, [1] first.")
    artifacts: list[ArtifactLink] = Field(default_factory=list)
    degraded: bool = Field(False, description="The search failed in part (see degraded_reasons) but found documents.")
    degraded_reasons: list[str] = Field(default_factory=list)
    cached: bool = Field(False, description="Answered from an identical earlier job.")
    stale: dict[str, str] | None = Field(None, description="Cited documents changed or deleted since the answer was "
                                         "written, by document id: search again for a current answer.")
    error: str | None = None
    next_step: str | None = None


class FeedbackOutcome(BaseModel):
    job_id: str
    rating: str
    comment: str | None = None
    source: str | None = Field(None, description="The source rated; null: the answer itself.")


class CollectionOut(BaseModel):
    id: str
    name: str
    description: str | None = None
    documents: dict[str, int] = Field(description="Documents by status: pending, indexed, failed.")


class Collections(BaseModel):
    collections: list[CollectionOut]


class IngestOutcome(BaseModel):
    collection_id: str
    collection_name: str
    created: bool = Field(description="The collection did not exist and was made for these documents.")
    accepted: int
    documents: dict[str, int] = Field(description="The collection's documents by status after the wait.")
    indexed: bool = Field(description="Nothing of the collection is pending: a search sees these documents.")
    next_step: str | None = None


def job_outcome(view: dict[str, Any], base_url: str) -> JobOutcome:
    """A job view of ``GET /v1/jobs/{id}`` as the tools answer it; artifact links made absolute on ``base_url``."""
    response = JobResponse.load(view.get("response") or {})
    finished = view["status"] in TERMINAL
    outcome = JobOutcome(
        job_id=view["job_id"],
        status=view["status"],
        finished=finished,
        query=view.get("query"),
        answer=response.answer,
        sources=[SourceOut(document_id=s.document_id, title=s.title, score=s.score) for s in response.sources],
        artifacts=[ArtifactLink(agent_id=a.agent_id, type=a.type, filename=a.filename, content_type=a.content_type,
                                size=a.size, url=base_url.rstrip("/") + a.url)
                   for a in response.agent_artifacts if isinstance(a, InlinedArtifact)],
        degraded=response.degraded,
        degraded_reasons=response.degraded_reasons,
        cached=bool(view.get("cached")),
        stale=view.get("stale") or None,
        error=view.get("error"),
    )
    if not finished:
        outcome.next_step = (f"the job is still {view['status']}: call get_job with job_id {view['job_id']!r} "
                             "for its answer")
    return outcome


def collection_out(view: dict[str, Any]) -> CollectionOut:
    return CollectionOut(id=view["id"], name=view["name"], description=view.get("description"),
                         documents=view["documents"])
