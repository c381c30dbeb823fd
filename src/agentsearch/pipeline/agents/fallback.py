"""Fallback agents and critical agents: what a job does when one of its agents fails.

An agent's run fails when it ends ``error``, ``timeout`` or ``circuit_open`` (``skipped`` is the agent's own choice,
not a failure). Then the agent's fallback, if its spec names one, runs in its place with the same input and
context; both runs are recorded, the fallback's saying which agent it stood in for. A fallback is one level deep:
its own failure is final. When the last run failed and the agent is critical, the job cannot go on: the caller gets
``CriticalAgentFailed``; a non-critical agent's failure leaves the state as it was, as before.

Usage::

    outcome = run_with_fallback(runner, spec, PreSearchInput(query="..."), ctx)
    state.agent_runs.extend(outcome.runs)
    if outcome.output is not None:
        state.query = outcome.output.query
    outcome.raise_if_critical()           # CriticalAgentFailed: the job ends failed with its reason
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pydantic import BaseModel

from agentsearch.pipeline.agents.base import AgentContext
from agentsearch.pipeline.records.agent_runs import AgentRun, AgentSpec

FAILED = frozenset({"error", "timeout", "circuit_open"})


class Runner(Protocol):
    """What this module needs of ``agentsearch.pipeline.agents.runner.AgentRunner``."""

    def run(self, spec: AgentSpec, inp: BaseModel, ctx: AgentContext) -> tuple[AgentRun, BaseModel | None]: ...


class CriticalAgentFailed(RuntimeError):
    """A critical agent and its fallback (if any) failed: the job ends ``failed`` with this message."""


def failed(run: AgentRun) -> bool:
    return run.status in FAILED


@dataclass(frozen=True)
class FallbackOutcome:
    """The runs of one agent step (the agent's, then its fallback's if it stood in) and the output that counts: the
    last run's, None when it did not end ``ok``."""

    spec: AgentSpec
    runs: list[AgentRun]
    output: BaseModel | None

    @property
    def last(self) -> AgentRun:
        return self.runs[-1]

    @property
    def critical_failure(self) -> str | None:
        """Why the job must fail, or None: set only when the agent is critical and its last run failed."""
        if not self.spec.critical or not failed(self.last):
            return None
        return critical_reason(self.spec, self.runs)

    def raise_if_critical(self) -> None:
        if (reason := self.critical_failure) is not None:
            raise CriticalAgentFailed(reason)


def critical_reason(spec: AgentSpec, runs: list[AgentRun]) -> str:
    """The job's failure reason: the critical agent and every run that failed for it, with its first error."""
    said = "; ".join(f"{r.agent_id} ended {r.status}: {(r.errors or [''])[0]}" for r in runs)
    return f"critical agent {spec.agent_id} failed ({said})"


def run_with_fallback(runner: Runner, spec: AgentSpec, inp: BaseModel, ctx: AgentContext) -> FallbackOutcome:
    """Run ``spec``'s agent; if it failed and names a fallback, run that with the same input and context."""
    run, output = runner.run(spec, inp, ctx)
    if not failed(run) or spec.fallback is None:
        return FallbackOutcome(spec, [run], output)
    # One level: whatever the fallback's own spec says, nothing stands in for it.
    stand_in = spec.fallback.model_copy(update={"fallback": None})
    fallback_run, fallback_output = runner.run(stand_in, inp, ctx)
    fallback_run.stood_in_for = spec.agent_id
    return FallbackOutcome(spec, [run, fallback_run], fallback_output)
