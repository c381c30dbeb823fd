"""Per-stage deadlines: the budget arithmetic on a fake clock, and the steps held to it with the real AgentRunner
(fake Redis) and fake agents."""

from __future__ import annotations

import time

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import AgentArtifact, PreSearchAgent, PreSearchOutput, ResponseAgent, Stage
from agentsearch.pipeline.job.agent_call import pre_search_step, response_step
from agentsearch.pipeline.job.assembly import assemble_response
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.stage_budget import (
    STAGE_TIMEOUT,
    StageBudget,
    StageTimeouts,
    effective,
    over_deadline,
    stage_timed_out,
    start_clock,
)
from agentsearch.pipeline.records.agent_runs import AgentRun, AgentSpec
from tests.support.slow_agent import SlowAgent


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def state(**kw) -> JobState:
    return JobState(job_id="j1", collection_id="c1", user_id="u1", query="solar output", **kw)


def spec(agent_id: str, stage: Stage = Stage.PRE_SEARCH, **kw) -> AgentSpec:
    return AgentSpec(agent_id=agent_id, stage=stage, config_id=f"cfg-{agent_id}", **kw)


def test_remaining_is_the_budget_less_the_time_since_the_clock_started():
    clock = Clock()
    job = state(stage_timeouts={"pre_search": 2.0})
    start_clock(job, Stage.PRE_SEARCH, now=clock.now)
    budget = StageBudget.of(job, Stage.PRE_SEARCH, clock)
    clock.now += 0.5
    assert budget.remaining() == pytest.approx(1.5)
    clock.now += 2.0
    assert budget.remaining() == pytest.approx(-0.5) and budget.elapsed() == pytest.approx(2.5)


def test_no_budget_no_clock_and_a_stage_without_its_clock_gets_its_whole_budget():
    job = state()
    start_clock(job, Stage.PRE_SEARCH, now=5.0)
    assert job.stage_clock == {} and StageBudget.of(job, Stage.PRE_SEARCH) is None
    budgeted = state(stage_timeouts={"response": 3.0})
    start_clock(budgeted, Stage.PRE_SEARCH, now=5.0)  # no budget for pre_search: nothing stamped
    assert budgeted.stage_clock == {}
    clock = Clock(50.0)
    budget = StageBudget.of(budgeted, Stage.RESPONSE, clock)  # never started: starts now
    assert budget.remaining() == 3.0 and budgeted.stage_clock == {"response": 50.0}


def test_a_started_agent_gets_min_of_its_own_timeout_and_what_is_left():
    clock = Clock()
    job = state(stage_timeouts={"pre_search": 10.0}, stage_clock={"pre_search": clock.now})
    budget = StageBudget.of(job, Stage.PRE_SEARCH, clock)
    clock.now += 7.0
    bounded, cut = budget.bounded(spec("a", timeout_s=5.0), default_timeout_s=30.0)
    assert cut and bounded.timeout_s == pytest.approx(3.0)
    same, cut = budget.bounded(spec("b", timeout_s=2.0), default_timeout_s=30.0)
    assert not cut and same.timeout_s == 2.0
    # Without a timeout of its own the service's default is its own.
    bounded, cut = budget.bounded(spec("c"), default_timeout_s=1.0)
    assert not cut and bounded.timeout_s is None


def test_request_overrides_the_collection_stage_by_stage_and_the_deadline_bounds_all():
    assert effective({"pre_search": 2, "response": 9}, {"response": 4}) == {"pre_search": 2, "response": 4}
    assert effective(None, None) is None and effective({}, {}) is None
    assert over_deadline({"pre_search": 2, "response": 700}, 600) == (
        "response", "response may take at most the job deadline (600 s), not 700 s")
    assert over_deadline({"post_search": 600}, 600) is None
    with pytest.raises(ValidationError) as refused:
        StageTimeouts(response=0)
    assert refused.value.errors()[0]["loc"] == ("response",)
    with pytest.raises(ValidationError):
        StageTimeouts(answer=3)  # not a stage
    assert StageTimeouts(pre_search=1.5).given() == {"pre_search": 1.5}


class Quick(PreSearchAgent):
    agent_id = "quick"
    cacheable = False

    def run(self, inp, ctx):
        return PreSearchOutput(query=f"{inp.query} quick")


class Slow(SlowAgent):
    agent_id = "slow"
    sleep_s = 5.0  # far past every deadline below: one cut late still shows


class Renderer(ResponseAgent):
    agent_id = "renderer"

    def run(self, inp, ctx):
        return AgentArtifact(agent_id=self.agent_id, type="text", filename="r.txt", content_type="text/plain",
                             data=b"r")


def test_an_agent_not_started_when_the_budget_is_spent_is_skipped_stage_timeout(make_runner):
    runner = make_runner(Quick, Slow)
    spent = state(stage_timeouts={"pre_search": 1.0}, stage_clock={"pre_search": time.time() - 1.5})
    after = pre_search_step(spent, spec("quick"), runner)
    (run,) = after.agent_runs
    assert (run.status, run.errors[0]) == ("skipped", STAGE_TIMEOUT)
    assert run.metadata["stage_budget_s"] == 1.0 and run.metadata["stage_elapsed_s"] >= 1.5
    assert after.query == "solar output"  # the state as it was


def test_a_started_agent_is_cut_at_the_end_of_its_stage(make_runner):
    runner = make_runner(Quick, Slow)
    job = state(stage_timeouts={"pre_search": 1.5}, stage_clock={"pre_search": time.time() - 0.5})
    started = time.perf_counter()
    after = pre_search_step(job, spec("slow", timeout_s=20.0), runner)
    assert time.perf_counter() - started < 4  # the stage's last second: not the agent's own 20 s, nor its 5 s of work
    (run,) = after.agent_runs
    assert run.status == "timeout" and run.errors[0] == STAGE_TIMEOUT and stage_timed_out(run)
    # Its own deadline (not the stage's) says nothing of the stage.
    own = pre_search_step(state(), spec("slow", timeout_s=0.2), runner).agent_runs[0]
    assert own.status == "timeout" and not stage_timed_out(own)


def test_a_fallback_gets_only_what_its_agent_left(make_runner):
    runner = make_runner(Quick, Slow)
    job = state(stage_timeouts={"pre_search": 0.4}, stage_clock={"pre_search": time.time()})
    after = pre_search_step(job, spec("slow", fallback=spec("quick")), runner)
    assert [(r.agent_id, r.status, r.errors[0]) for r in after.agent_runs] == [
        ("slow", "timeout", STAGE_TIMEOUT), ("quick", "skipped", STAGE_TIMEOUT)]


def test_response_agents_past_the_budget_are_recorded_and_the_response_is_not_reused(make_runner, tmp_path):
    class Artifacts:
        def save(self, job_id, artifact):
            return None

    runner = make_runner(Renderer)
    late = state(answer="a", stage_timeouts={"response": 1.0}, stage_clock={"response": time.time() - 2})
    run = response_step(late, spec("renderer", Stage.RESPONSE), runner, Artifacts())
    assert (run.status, run.errors) == ("skipped", [STAGE_TIMEOUT])
    response = assemble_response(late, [run])
    assert response["complete"] is False and response["stage_timeouts"] == {"response": 1.0}
    assert response["skipped"] == [{"agent_id": "renderer", "stage": "response", "status": "skipped",
                                    "reason": STAGE_TIMEOUT}]
    on_time = AgentRun(agent_id="renderer", stage=Stage.RESPONSE, success=True, status="ok")
    assert assemble_response(late, [on_time])["complete"] is True
