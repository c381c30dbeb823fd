"""One trace per job: stage functions run in process, the state handed on as JSON like the canvas does (fakeredis)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agentsearch.pipeline.agents.base import (
    AgentArtifact,
    Document,
    PostSearchAgent,
    PreSearchAgent,
    PreSearchOutput,
    ResponseAgent,
    Stage,
)
from agentsearch.pipeline.job import agent_call, workflow
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.observability import tracing
from agentsearch.pipeline.records.agent_runs import AgentSpec, ArtifactRef
from agentsearch.pipeline.retrieval.retriever import RetrievalResult

SEEN_IN_AGENT: list[trace.SpanContext] = []


class Expander(PreSearchAgent):
    agent_id = "expander"
    cacheable = False

    def run(self, inp, ctx):
        # The runner calls agents on a thread of its own; the agent's span must still be the current one there.
        SEEN_IN_AGENT.append(trace.get_current_span().get_span_context())
        return PreSearchOutput(query=f"{inp.query} turbines")


class BrokenFilter(PostSearchAgent):
    agent_id = "broken_filter"
    cacheable = False

    def run(self, inp, ctx):
        raise ConnectionError("scoring service unreachable")


class Summary(ResponseAgent):
    agent_id = "summary"
    cacheable = False

    def run(self, inp, ctx):
        return AgentArtifact(agent_id=self.agent_id, type="txt", data=inp.answer.encode() or b"-",
                             filename="summary.txt", content_type="text/plain")


class FakeRetriever:
    def search(self, name, query, config, epoch=0, model=""):
        doc = Document(id="d1", title="Wind report", text="Offshore wind turbines reached 45% capacity factor.",
                       score=0.9)
        return RetrievalResult(documents=[doc], metrics={"cache_hit": False, "sources_found": 1})


class FakeArtifacts:
    def save(self, job_id, artifact):
        return ArtifactRef(id=str(uuid.uuid4()), agent_id=artifact.agent_id, type=artifact.type,
                           filename=artifact.filename, content_type=artifact.content_type, size=len(artifact.data))


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    tracing.configure_tracing("none", "agentsearch-test", processor=SimpleSpanProcessor(exporter), set_global=False)
    SEEN_IN_AGENT.clear()
    yield exporter
    tracing.shutdown_tracing()


@pytest.fixture
def services(make_runner):
    runner = make_runner(Expander, BrokenFilter, Summary)
    return SimpleNamespace(settings=runner.settings, runner=runner, retriever=FakeRetriever(),
                           artifacts=FakeArtifacts())


def hop(state: JobState) -> JobState:
    """What crossing a Celery task boundary does to the state: JSON out, JSON in."""
    return JobState.load(state.dump())


def run_job(services, job_id: str) -> None:
    state = JobState(job_id=job_id, collection_id=str(uuid.uuid4()), query="offshore wind capacity")
    state = hop(agent_call.pre_search_step(state, AgentSpec(agent_id="expander", stage=Stage.PRE_SEARCH),
                                           services.runner))
    state = hop(workflow.core_search_step(state, services))
    state = hop(agent_call.post_search_step(state, AgentSpec(agent_id="broken_filter", stage=Stage.POST_SEARCH),
                                        services.runner))
    state = hop(workflow.answer_step(state))
    run = agent_call.response_step(state, AgentSpec(agent_id="summary", stage=Stage.RESPONSE), services.runner,
                               services.artifacts)
    assert [r.status for r in [*state.agent_runs, run]] == ["ok", "error", "ok"]
    ended = datetime.now(UTC)
    tracing.emit_job_span(job_id, "succeeded", ended - timedelta(seconds=2), ended, state.traceparent)


def test_a_job_is_one_trace_job_then_stages_then_agents(spans, services):
    job_id = str(uuid.uuid4())
    run_job(services, job_id)
    finished = spans.get_finished_spans()
    by_name = {s.name: s for s in finished}
    assert sorted(by_name) == sorted(["job", "pre_search", "core_search", "post_search", "answer", "response",
                                      "agent expander", "agent broken_filter", "agent summary"])
    assert len(finished) == 9

    # The trace id is the job id: an operator finds the trace from the job.
    assert {s.context.trace_id for s in finished} == {uuid.UUID(job_id).int}
    job = by_name["job"]
    assert job.parent is None
    for stage in ("pre_search", "core_search", "post_search", "answer", "response"):
        assert by_name[stage].parent.span_id == job.context.span_id, stage
        assert by_name[stage].attributes["agentsearch.stage"] == stage
        assert by_name[stage].attributes["agentsearch.job_id"] == job_id
    for agent, stage in (("expander", "pre_search"), ("broken_filter", "post_search"), ("summary", "response")):
        span = by_name[f"agent {agent}"]
        assert span.parent.span_id == by_name[stage].context.span_id, agent
        assert span.attributes["agentsearch.agent"] == agent
        assert span.attributes["agentsearch.stage"] == stage
        assert span.attributes["agentsearch.job_id"] == job_id
    assert SEEN_IN_AGENT == [by_name["agent expander"].context]


def test_a_failing_agent_span_has_error_status_and_the_others_do_not(spans, services):
    run_job(services, str(uuid.uuid4()))
    by_name = {s.name: s for s in spans.get_finished_spans()}
    failed = by_name["agent broken_filter"]
    assert failed.status.status_code == StatusCode.ERROR
    assert "scoring service unreachable" in failed.status.description
    assert failed.attributes["agentsearch.status"] == "error"
    assert by_name["agent expander"].status.status_code == StatusCode.UNSET
    assert by_name["agent expander"].attributes["agentsearch.status"] == "ok"
    # The agent failed, not the stage: the runner isolates it.
    assert by_name["post_search"].status.status_code == StatusCode.UNSET


def test_the_first_step_puts_the_job_trace_context_in_the_state(spans, services):
    job_id = str(uuid.uuid4())
    state = JobState(job_id=job_id, collection_id=str(uuid.uuid4()), query="q")
    assert state.traceparent is None
    # Two searches of a group start from the same state, each in its own process: they agree without talking.
    first = workflow.core_search_step(state, services)
    second = workflow.core_search_step(state, services, str(uuid.uuid4()))
    assert first.traceparent == second.traceparent == tracing.job_traceparent(job_id)
    assert first.traceparent == f"00-{uuid.UUID(job_id).hex}-{first.traceparent.split('-')[2]}-01"
    # A later step keeps what it was given, even a context from elsewhere.
    given = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    later = workflow.answer_step(state.model_copy(update={"traceparent": given}))
    assert later.traceparent == given
    answer_span = next(s for s in spans.get_finished_spans() if s.name == "answer")
    assert answer_span.parent.span_id == 0xB7AD6B7169203331


def test_a_failed_job_span_is_an_error(spans):
    job_id = str(uuid.uuid4())
    started = datetime(2026, 1, 5, 9, 0, 0)  # naive, as SQLite returns it: taken as UTC
    tracing.emit_job_span(job_id, "failed", started, started + timedelta(seconds=3), error="core_search failed")
    (job,) = spans.get_finished_spans()
    assert job.status.status_code == StatusCode.ERROR
    assert job.end_time - job.start_time == 3 * 10**9
    assert job.start_time == int(started.replace(tzinfo=UTC).timestamp() * 1e9)
    assert format(job.context.span_id, "016x") == tracing.job_traceparent(job_id).split("-")[2]


def test_a_state_saved_before_the_field_existed_still_loads():
    payload = JobState(job_id="j1", collection_id="c1", query="q").dump()
    del payload["traceparent"]
    assert JobState.load(payload).traceparent is None


def test_without_tracing_configured_steps_record_nothing_and_still_run(services):
    assert not tracing.enabled()
    state = JobState(job_id=str(uuid.uuid4()), collection_id=str(uuid.uuid4()), query="q")
    out = agent_call.pre_search_step(state, AgentSpec(agent_id="expander", stage=Stage.PRE_SEARCH), services.runner)
    assert out.query == "q turbines"
    tracing.emit_job_span(state.job_id, "succeeded", datetime.now(UTC))  # a no-op, not an error
