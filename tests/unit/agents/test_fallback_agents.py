"""Fallback and critical agents: the real AgentRunner (fake Redis) with fake agents that fail each way."""

from __future__ import annotations

import pytest

from agentsearch.pipeline.agents.base import (
    AgentArtifact,
    AgentContext,
    PreSearchAgent,
    PreSearchInput,
    PreSearchOutput,
    ResponseAgent,
    Stage,
)
from agentsearch.pipeline.agents.fallback import CriticalAgentFailed, run_with_fallback
from agentsearch.pipeline.job.agent_call import pre_search_step, response_step
from agentsearch.pipeline.job.assembly import critical_response_failure
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.records.agent_runs import AgentRun, AgentSpec
from tests.support.slow_agent import SlowAgent

SEEN: list[tuple[str, str]] = []  # (agent id, query) of every input a fallback received


class Exploding(PreSearchAgent):
    agent_id = "exploding"
    cacheable = False

    def run(self, inp, ctx):
        raise RuntimeError("upstream returned HTTP 500")


class Sleepy(SlowAgent):
    agent_id = "sleepy"
    sleep_s = 0.5


class Standby(PreSearchAgent):
    agent_id = "standby"
    cacheable = False

    def run(self, inp, ctx):
        SEEN.append((self.agent_id, inp.query))
        return PreSearchOutput(query=f"{inp.query} (standby)", metadata={"by": "standby"})


class AlsoExploding(PreSearchAgent):
    agent_id = "also_exploding"
    cacheable = False

    def run(self, inp, ctx):
        SEEN.append((self.agent_id, inp.query))
        raise ConnectionError("the standby is down too")


class BrokenRenderer(ResponseAgent):
    agent_id = "broken_renderer"
    cacheable = False

    def run(self, inp, ctx):
        raise ValueError("renderer crashed")


class PlainRenderer(ResponseAgent):
    agent_id = "plain_renderer"
    cacheable = False

    def run(self, inp, ctx):
        return AgentArtifact(agent_id=self.agent_id, type="text", filename="plain.txt", content_type="text/plain",
                             data=b"plain")


AGENTS = (Exploding, Sleepy, Standby, AlsoExploding, BrokenRenderer, PlainRenderer)


@pytest.fixture(autouse=True)
def _clear_seen():
    SEEN.clear()


def spec(agent_id: str, stage: Stage = Stage.PRE_SEARCH, **kw) -> AgentSpec:
    return AgentSpec(agent_id=agent_id, stage=stage, config_id=f"cfg-{agent_id}", **kw)


def ctx() -> AgentContext:
    return AgentContext(pipeline_stage=Stage.PRE_SEARCH, user_id="u1", collection_id="c1")


@pytest.mark.parametrize(
    ("failing", "extra", "status"),
    [
        ("exploding", {}, "error"),
        ("sleepy", {"timeout_s": 0.05}, "timeout"),
    ],
)
def test_fallback_runs_with_the_same_input_and_both_are_recorded(make_runner, failing, extra, status):
    runner = make_runner(*AGENTS)
    outcome = run_with_fallback(runner, spec(failing, fallback=spec("standby"), **extra),
                                PreSearchInput(query="solar output"), ctx())
    first, second = outcome.runs
    assert (first.agent_id, first.status, first.stood_in_for) == (failing, status, None)
    assert (second.agent_id, second.status, second.stood_in_for) == ("standby", "ok", failing)
    assert SEEN == [("standby", "solar output")]
    assert outcome.output.query == "solar output (standby)"
    assert outcome.critical_failure is None


def test_an_open_circuit_hands_over_to_the_fallback(make_runner):
    runner = make_runner(*AGENTS)
    broken = spec("exploding", fallback=spec("standby"), breaker_fail_max=1, breaker_reset_timeout_s=60)
    run_with_fallback(runner, broken, PreSearchInput(query="q"), ctx())  # this failure opens the circuit
    outcome = run_with_fallback(runner, broken, PreSearchInput(query="q"), ctx())
    assert [r.status for r in outcome.runs] == ["circuit_open", "ok"]
    assert outcome.last.stood_in_for == "exploding"


def test_no_fallback_for_a_run_that_succeeded_or_without_one(make_runner):
    runner = make_runner(*AGENTS)
    ok = run_with_fallback(runner, spec("standby", fallback=spec("exploding")), PreSearchInput(query="q"), ctx())
    assert [r.agent_id for r in ok.runs] == ["standby"]
    alone = run_with_fallback(runner, spec("exploding"), PreSearchInput(query="q"), ctx())
    assert [r.status for r in alone.runs] == ["error"] and alone.output is None
    assert alone.critical_failure is None  # not critical: skipped as before


def test_a_fallback_is_one_level_deep(make_runner):
    runner = make_runner(*AGENTS)
    chained = spec("exploding", fallback=spec("also_exploding", fallback=spec("standby")))
    outcome = run_with_fallback(runner, chained, PreSearchInput(query="q"), ctx())
    assert [r.agent_id for r in outcome.runs] == ["exploding", "also_exploding"]
    assert SEEN == [("also_exploding", "q")]


def test_critical_agent_and_its_fallback_failing_give_the_jobs_reason(make_runner):
    runner = make_runner(*AGENTS)
    outcome = run_with_fallback(runner, spec("exploding", critical=True, fallback=spec("also_exploding")),
                                PreSearchInput(query="q"), ctx())
    reason = outcome.critical_failure
    assert reason.startswith("critical agent exploding failed")
    assert "exploding ended error: RuntimeError: upstream returned HTTP 500" in reason
    assert "also_exploding ended error: ConnectionError: the standby is down too" in reason
    with pytest.raises(CriticalAgentFailed, match="critical agent exploding failed"):
        outcome.raise_if_critical()


def test_critical_agent_saved_by_its_fallback_does_not_fail(make_runner):
    runner = make_runner(*AGENTS)
    outcome = run_with_fallback(runner, spec("exploding", critical=True, fallback=spec("standby")),
                                PreSearchInput(query="q"), ctx())
    assert outcome.critical_failure is None
    outcome.raise_if_critical()


def state() -> JobState:
    return JobState(job_id="j1", collection_id="c1", user_id="u1", query="solar output", answer="An answer.")


def test_pre_search_step_records_both_runs_and_takes_the_fallbacks_output(make_runner):
    runner = make_runner(*AGENTS)
    after = pre_search_step(state(), spec("exploding", fallback=spec("standby")), runner)
    assert [(r.agent_id, r.status) for r in after.agent_runs] == [("exploding", "error"), ("standby", "ok")]
    assert after.query == "solar output (standby)" and after.metadata["by"] == "standby"
    assert after.agent_runs[1].data == {"query": "solar output (standby)", "skip_search": False}


def test_pre_search_step_of_a_critical_agent_without_fallback_raises(make_runner):
    runner = make_runner(*AGENTS)
    with pytest.raises(CriticalAgentFailed, match="critical agent exploding failed"):
        pre_search_step(state(), spec("exploding", critical=True), runner)


class _Artifacts:
    def save(self, job_id, artifact):
        from agentsearch.pipeline.records.agent_runs import ArtifactRef

        return ArtifactRef(id="a1", agent_id="x", type=artifact.type, filename=artifact.filename,
                           content_type=artifact.content_type, size=len(artifact.data))


def test_response_step_record_carries_the_stand_in_and_its_artifact(make_runner):
    runner = make_runner(*AGENTS)
    broken = spec("broken_renderer", Stage.RESPONSE, critical=True, fallback=spec("plain_renderer", Stage.RESPONSE))
    record = response_step(state(), broken, runner, _Artifacts())
    assert (record.agent_id, record.status) == ("broken_renderer", "error")
    flat = AgentRun.model_validate(record.model_dump(mode="json")).flat()  # as the chord carries it
    assert [(r.agent_id, r.status, r.stood_in_for) for r in flat] == [
        ("broken_renderer", "error", None), ("plain_renderer", "ok", "broken_renderer")]
    assert flat[1].artifact.filename == "plain.txt" and flat[0].stand_in is None
    assert critical_response_failure([broken], [record]) is None


def test_critical_response_agent_failing_is_the_assemblys_failure(make_runner):
    runner = make_runner(*AGENTS)
    critical = spec("broken_renderer", Stage.RESPONSE, critical=True)
    plain = spec("broken_renderer", Stage.RESPONSE)
    record = response_step(state(), critical, runner, _Artifacts())
    assert critical_response_failure([critical], [record]) == (
        "critical agent broken_renderer failed (broken_renderer ended error: ValueError: renderer crashed)")
    assert critical_response_failure([plain], [record]) is None
