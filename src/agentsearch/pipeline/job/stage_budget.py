"""Per-stage deadlines: how many seconds the pre-search agents, the post-search agents and the response agents of a
job may take, each stage on a clock of its own.

A stage's clock starts when the step before it hands the job over (the submit for pre-search, the search for
post-search, the answer for the response agents), so time spent waiting in a queue counts. An agent that has not
started when its stage's budget is spent is recorded ``skipped`` with the reason ``stage_timeout``; one that starts
gets at most what is left (its timeout is min(own, remaining)), and if that cut is what stopped it, its ``timeout``
record says ``stage_timeout`` first. The clock is wall time (``time.time``): the steps of one job may run on several
machines, whose clocks are assumed to be kept in step (NTP). Without budgets nothing here changes a job.

Usage::

    state.stage_timeouts = {"pre_search": 2.0}
    start_clock(state, Stage.PRE_SEARCH)                     # the step before the stage hands over
    budget = StageBudget.of(state, Stage.PRE_SEARCH)         # None: the stage has no budget
    runner = budget.runner(services.runner, default_timeout_s=30.0) if budget else services.runner
    run, output = runner.run(spec, inp, ctx)                 # skipped, cut to what is left, or as before
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field, StrictFloat

from agentsearch.pipeline.agents.base import AgentContext, Stage
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.records.agent_runs import AgentRun, AgentSpec

STAGE_TIMEOUT = "stage_timeout"


class StageTimeouts(BaseModel):
    """Seconds per stage, each optional (a stage without one has no budget of its own); the job deadline bounds
    every one of them (``over_deadline``).

    Each is a JSON number and nothing else: pydantic's lax mode read ``"5"`` as 5 s and ``true`` as a budget of 1 s,
    so a client's mistake became a deadline that cut its agents short."""

    model_config = ConfigDict(extra="forbid")

    pre_search: StrictFloat | None = Field(None, gt=0, description="Seconds for the pre-search agents, from the "
                                                                    "submit.")
    post_search: StrictFloat | None = Field(None, gt=0, description="Seconds for the post-search agents, from the "
                                                                     "search.")
    response: StrictFloat | None = Field(None, gt=0, description="Seconds for the response agents, from the answer.")

    def given(self) -> dict[str, float]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


def over_deadline(timeouts: dict[str, float], deadline_s: float) -> tuple[str, str] | None:
    """The first stage whose budget is longer than the job's whole deadline, with why; None if all fit."""
    for stage in ("pre_search", "post_search", "response"):
        value = timeouts.get(stage)
        if value is not None and value > deadline_s:
            return stage, f"{stage} may take at most the job deadline ({deadline_s:g} s), not {value:g} s"
    return None


def effective(collection: dict[str, float] | None, request: dict[str, float] | None) -> dict[str, float] | None:
    """The job's budgets: the collection's, each overridden by the request's; None when neither sets any."""
    merged = {**(collection or {}), **(request or {})}
    return merged or None


def start_clock(state: JobState, stage: Stage, now: float | None = None) -> None:
    """The step before ``stage`` hands the job over: the stage's clock starts now. Nothing for a job without
    a budget for it (its messages stay as they were)."""
    if state.stage_timeouts and stage.value in state.stage_timeouts:
        state.stage_clock[stage.value] = time.time() if now is None else now


@dataclass
class StageBudget:
    stage: Stage
    budget_s: float
    started_at: float
    clock: Callable[[], float] = field(default=time.time)

    @classmethod
    def of(cls, state: JobState, stage: Stage, clock: Callable[[], float] = time.time) -> StageBudget | None:
        """The stage's budget in this job, or None. A stage whose clock was never started (a message from before
        budgets, a step run on its own) starts it now: it still gets its whole budget, never less."""
        budget = (state.stage_timeouts or {}).get(stage.value)
        if budget is None:
            return None
        started = state.stage_clock.get(stage.value)
        if started is None:
            started = state.stage_clock[stage.value] = clock()
        return cls(stage, budget, started, clock)

    def elapsed(self) -> float:
        return max(0.0, self.clock() - self.started_at)

    def remaining(self) -> float:
        return self.budget_s - self.elapsed()

    def skipped(self, spec: AgentSpec) -> AgentRun:
        """The record of an agent that never started: its stage's time was spent."""
        return AgentRun(agent_id=spec.agent_id, config_id=spec.config_id, stage=spec.stage, success=False,
                        status="skipped", errors=[STAGE_TIMEOUT],
                        metadata={"stage_budget_s": self.budget_s, "stage_elapsed_s": round(self.elapsed(), 3)})

    def bounded(self, spec: AgentSpec, default_timeout_s: float) -> tuple[AgentSpec, bool]:
        """The spec with its timeout cut to what is left, and whether it was cut."""
        own = spec.timeout_s or default_timeout_s
        left = self.remaining()
        if left >= own:
            return spec, False
        return spec.model_copy(update={"timeout_s": max(left, 0.001)}), True

    def runner(self, runner, default_timeout_s: float) -> BudgetedRunner:
        return BudgetedRunner(runner, self, default_timeout_s)


class BudgetedRunner:
    """An agent runner (``agentsearch.pipeline.agents.runner.AgentRunner``'s ``run``) held to a stage's budget: each
    run,
    a fallback's included, is skipped when nothing is left and gets at most what is left otherwise."""

    def __init__(self, runner, budget: StageBudget, default_timeout_s: float) -> None:
        self.inner, self.budget, self.default_timeout_s = runner, budget, default_timeout_s

    def run(self, spec: AgentSpec, inp: BaseModel, ctx: AgentContext) -> tuple[AgentRun, BaseModel | None]:
        if self.budget.remaining() <= 0:
            return self.budget.skipped(spec), None
        bounded, cut = self.budget.bounded(spec, self.default_timeout_s)
        run, output = self.inner.run(bounded, inp, ctx)
        if cut and run.status == "timeout":
            # The stage's end stopped it, not its own deadline: said first, as for the agents it never reached.
            run.errors = [STAGE_TIMEOUT, *(run.errors or [])]
            run.metadata = {**run.metadata, "stage_budget_s": self.budget.budget_s}
        return run, output


def stage_timed_out(run: AgentRun) -> bool:
    """Whether the stage's budget, not the agent, decided this run: such a job's response is not reused."""
    return bool(run.errors and run.errors[0] == STAGE_TIMEOUT)
