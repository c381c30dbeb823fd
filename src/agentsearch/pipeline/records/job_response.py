"""A finished job's response: built once, as the job's last step assembles it (``agentsearch.pipeline.job.assembly``),
and served as it was stored by the API (``GET /v1/jobs/{id}``, a search that waits), the MCP tools and the webhooks.

The job's row keeps the response as JSON with its artifacts by reference (``ArtifactRef``); the API serves it with
each artifact's bytes inlined (``InlinedArtifact``, base64) and a link to download it, the MCP tools with the links
alone, and a webhook's delivery names the links. Only the keys a response was written with are written back
(``dump``): a response stored by an earlier release is served as it was stored, and one answered from the whole-job
cache carries ``cached`` and ``cached_from`` beside its source's keys.

Usage::

    response = job_response(state, response_runs)            # the job's last step (agentsearch.pipeline.job.assembly)
    jobs.succeed(job_id, response.dump(), runs, timings)     # the JSON the job's row keeps
    stored = JobResponse.load(job.response)
    stored.with_artifacts_inlined({ref_id: data, ...}, job_id).dump()   # what the API serves
    stored.artifact_filenames()                               # what a webhook links
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from agentsearch.pipeline.documents import Citation, CotStep, Source
from agentsearch.pipeline.platform.json_record import JsonRecord
from agentsearch.pipeline.records.agent_runs import AgentRun, ArtifactRef, Stage

# The records a response nests, read and written back as they were stored (``JsonRecord``).


class StoredSource(Source, JsonRecord):
    pass


class StoredCotStep(CotStep, JsonRecord):
    pass


class StoredCitation(Citation, JsonRecord):
    pass


class StoredArtifact(ArtifactRef, JsonRecord):
    """An artifact by reference (an ``ArtifactRef``), as the job's row keeps it."""


class InlinedArtifact(JsonRecord):
    """An artifact as the API serves it: its bytes in base64 and where to download them."""

    agent_id: str
    type: str
    data: str = Field(description="The artifact's bytes, base64-encoded.")
    filename: str
    content_type: str
    size: int
    metadata: dict[str, Any] = Field(default_factory=dict)
    url: str = Field(description="The download link, relative to the API (the same key reads it).")


class AgentLine(JsonRecord):
    """One agent run as the response lists it."""

    agent_id: str
    config_id: str | None = None
    stage: Stage
    status: str
    duration_ms: float = 0.0
    cache_hit: bool = False
    errors: list[str] | None = None
    worker: str | None = None
    # Written only when set: a fallback's run and a routed run say so, the others do not carry the keys.
    stood_in_for: str | None = None
    next_agent_id: str | None = None

    @classmethod
    def of(cls, run: AgentRun) -> AgentLine:
        return cls.model_validate({
            "agent_id": run.agent_id,
            "config_id": run.config_id,
            "stage": run.stage,
            "status": run.status,
            "duration_ms": run.duration_ms,
            "cache_hit": run.cache_hit,
            "errors": run.errors,
            "worker": run.worker,
            **({"stood_in_for": run.stood_in_for} if run.stood_in_for else {}),
            **({"next_agent_id": run.next_agent_id} if run.next_agent_id else {}),
        })


class SkippedLine(JsonRecord):
    """An agent run that did not end ``ok``, and its first error as the reason."""

    agent_id: str
    stage: Stage
    status: str
    reason: str = ""


class JobResponse(JsonRecord):
    """The job's answer, its sources and citations, every agent's outcome, its artifacts, metadata and timings.

    Every field has a default so a response of any release reads; ``dump`` writes only the keys it was given.
    """

    job_id: str | None = None
    complete: bool = Field(False, description="Reused by the whole-job cache: nothing failed, was cut or degraded.")
    degraded: bool = Field(False, description="Part of the search failed or the LLM's answer was replaced.")
    degraded_reasons: list[str] = Field(default_factory=list)
    query: str | None = Field(None, description="The user's question.")
    search_query: str | None = Field(None, description="The query searched, as the pre-search agents left it.")
    answer: str | None = None
    sources: list[StoredSource] = Field(default_factory=list)
    cot_steps: list[StoredCotStep] | None = None
    citations: list[StoredCitation] = Field(default_factory=list)
    agent_artifacts: list[StoredArtifact | InlinedArtifact] = Field(
        default_factory=list, description="By reference as stored; inlined as the API serves them.")
    agents: list[AgentLine] = Field(default_factory=list)
    skipped: list[SkippedLine] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    timings_ms: dict[str, float | int] = Field(default_factory=dict)
    stage_timeouts: dict[str, float | int] | None = None
    document_versions: dict[str, str] | None = Field(
        None, description="The version (content digest) of each cited document the answer read, by document id.")
    cached: bool | None = Field(None, description="Answered from an identical earlier job (its response copied).")
    cached_from: str | None = None

    @classmethod
    def load(cls, stored: Mapping[str, Any]) -> JobResponse:
        """A response as a job's row keeps it (or as the API served it)."""
        return cls.model_validate(stored)

    def artifact_refs(self) -> list[StoredArtifact]:
        """The artifacts by reference, as the job's row keeps them."""
        return [a for a in self.agent_artifacts if isinstance(a, StoredArtifact)]

    def artifact_filenames(self) -> list[str]:
        return [a.filename for a in self.agent_artifacts if a.filename]

    def with_artifacts_inlined(self, data_by_id: Mapping[str, bytes], job_id: str) -> JobResponse:
        """The response as the API serves it: each stored artifact's bytes inlined and its download link (under
        ``job_id``, the job read, which may be a copy of the cached job that stored them); an artifact whose bytes
        are gone is left out."""
        inlined = [
            InlinedArtifact(agent_id=ref.agent_id, type=ref.type, data=base64.b64encode(data).decode("ascii"),
                            filename=ref.filename, content_type=ref.content_type, size=ref.size,
                            metadata=ref.metadata, url=f"/v1/jobs/{job_id}/artifacts/{ref.filename}")
            for ref in self.artifact_refs() if (data := data_by_id.get(ref.id)) is not None
        ]
        return self.model_copy(update={"agent_artifacts": inlined})
