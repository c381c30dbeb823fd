"""What a job keeps of its agents: the stage an agent runs in (``Stage``), the spec it runs one with (``AgentSpec``),
the record of each run (``AgentResult``; ``AgentRun`` as the job keeps it) and the artifact a response agent stored
(``ArtifactRef``, a claim check: the bytes stay in the database).

They sit below the agents and the job: the runner, the fallbacks, metrics and tracing read and write them without
knowing a job's state (``agentsearch.pipeline.job.job_state.JobState`` carries them). The agent contract
(``agentsearch.pipeline.agents.base``) builds on ``Stage`` and ``AgentResult``, and an agent imports them from there.

Usage::

    spec = AgentSpec(agent_id="language_detector", stage=Stage.PRE_SEARCH, timeout_s=2.0)
    run, output = runner.run(spec, PreSearchInput(query="..."), ctx)     # run: AgentRun, status ok/error/...
    records = run.flat()                                                 # with a fallback's run beside it
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field


class Stage(StrEnum):
    PRE_SEARCH = "pre_search"
    POST_SEARCH = "post_search"
    RESPONSE = "response"


class AgentResult(BaseModel):
    """One agent invocation as recorded in the job: what it returned (``data``, ``metadata``, ``errors``), whether it
    succeeded, and how: status, timing and cache use."""

    agent_id: str
    config_id: str | None = None
    stage: Stage
    success: bool
    status: str  # ok | error | timeout | circuit_open | skipped
    data: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)
    errors: list[str] | None = None
    duration_ms: float = 0.0
    cache_hit: bool = False
    next_agent_id: str | None = Field(
        None, description="The agent of the same stage this one named to run next (agentsearch.pipeline.job.routing).")


class AgentSpec(BaseModel):
    """One agent as a job runs it: which agent, with which config, and its runtime limits."""

    agent_id: str
    stage: Stage
    config: dict[str, Any] = Field(default_factory=dict)
    config_id: str | None = None
    priority: int = 0
    timeout_s: float | None = None
    cache_ttl_s: int | None = None
    breaker_fail_max: int | None = None
    breaker_reset_timeout_s: float | None = None
    # A failed run (error, timeout, open circuit) of a critical agent fails the job; of another one it is skipped.
    critical: bool = False
    # Runs in this agent's place, with the same input, when it fails (``agentsearch.pipeline.agents.fallback``). One
    # level only: a fallback's own spec carries no fallback.
    fallback: AgentSpec | None = None


class ArtifactRef(BaseModel):
    id: str
    agent_id: str
    type: str
    filename: str
    content_type: str
    size: int
    metadata: dict[str, Any] = Field(default_factory=dict)


class AgentRun(AgentResult):
    """An ``AgentResult`` as the job records it, with the worker that ran it and the artifact it stored."""

    worker: str | None = None
    artifact: ArtifactRef | None = None
    stood_in_for: str | None = Field(None, description="The agent whose failed run this fallback's run replaced.")
    # A response agent's record is one per step (the chord's and the ledger's unit): the run of the fallback that
    # stood in for it travels inside it, and the job records the two side by side (``AgentRun.flat``).
    stand_in: AgentRun | None = None

    def flat(self) -> list[AgentRun]:
        """This run and the stand-in's, as the job records them."""
        if self.stand_in is None:
            return [self]
        return [self.model_copy(update={"stand_in": None}), *self.stand_in.flat()]
