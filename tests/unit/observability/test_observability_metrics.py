"""Agent metrics recorded in (fake) Redis by the runner and exposed in Prometheus' text format by the collector."""

from __future__ import annotations

import time

import fakeredis
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from agentsearch.api.routes import metrics as metrics_route
from agentsearch.pipeline.agents.base import (
    AgentArtifact,
    AgentContext,
    AgentSkipped,
    PreSearchAgent,
    PreSearchInput,
    PreSearchOutput,
    ResponseAgent,
    ResponseAgentInput,
    Stage,
)
from agentsearch.pipeline.agents.runner import AgentRunner
from agentsearch.pipeline.observability.metrics import MetricsRecorder
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.records.agent_runs import AgentRun, AgentSpec
from tests.support.metric_samples import scrape, value


class Echo(PreSearchAgent):
    agent_id = "echo"  # cacheable: its second identical run is answered by the result cache

    def run(self, inp, ctx):
        return PreSearchOutput(query=inp.query)


class Broken(PreSearchAgent):
    agent_id = "broken"
    cacheable = False

    def run(self, inp, ctx):
        raise RuntimeError("thesaurus service returned HTTP 503")


class Skipper(PreSearchAgent):
    agent_id = "skipper"
    cacheable = False

    def run(self, inp, ctx):
        raise AgentSkipped("no glossary configured")


class Slow(PreSearchAgent):
    agent_id = "slow"
    cacheable = False

    def run(self, inp, ctx):
        time.sleep(0.3)
        return PreSearchOutput(query=inp.query)


class Memo(ResponseAgent):
    agent_id = "memo"
    cacheable = False

    def run(self, inp, ctx):
        return AgentArtifact(agent_id=self.agent_id, type="txt", data=b"x" * 3000, filename="memo.txt",
                             content_type="text/plain")


QUERY = PreSearchInput(query="offshore wind capacity factor")
PRE = AgentContext(pipeline_stage=Stage.PRE_SEARCH)


@pytest.fixture
def runner(make_runner) -> AgentRunner:
    return make_runner(Echo, Broken, Skipper, Slow, Memo)


def spec(agent_id: str, **kw) -> AgentSpec:
    return AgentSpec(agent_id=agent_id, stage=kw.pop("stage", Stage.PRE_SEARCH), **kw)


def test_agent_outcomes_are_counted_by_agent_and_status(runner, redis_client):
    runner.run(spec("echo"), QUERY, PRE)
    runner.run(spec("echo"), QUERY, PRE)  # same input: a cache hit
    for _ in range(3):
        runner.run(spec("broken", breaker_fail_max=2), QUERY, PRE)  # error, error, then the circuit is open
    runner.run(spec("skipper"), QUERY, PRE)
    run, _ = runner.run(spec("slow", timeout_s=0.05), QUERY, PRE)
    assert run.status == "timeout"

    samples = scrape(redis_client)
    runs = samples["agentsearch_agent_runs_total"]
    assert value(samples, "agentsearch_agent_runs_total", agent="echo", status="ok") == 1
    assert value(samples, "agentsearch_agent_runs_total", agent="echo", status="cached") == 1
    assert value(samples, "agentsearch_agent_runs_total", agent="broken", status="error") == 2
    assert value(samples, "agentsearch_agent_runs_total", agent="broken", status="circuit_open") == 1
    assert value(samples, "agentsearch_agent_runs_total", agent="skipper", status="skipped") == 1
    assert value(samples, "agentsearch_agent_runs_total", agent="slow", status="timeout") == 1
    assert sum(runs.values()) == 7  # every status of a seen agent is present, the others at zero
    assert value(samples, "agentsearch_agent_runs_total", agent="skipper", status="error") == 0

    # Only echo is cacheable: its two runs are one miss and one hit.
    assert value(samples, "agentsearch_cache_hits_total", cache="agent") == 1
    assert value(samples, "agentsearch_cache_misses_total", cache="agent") == 1
    assert value(samples, "agentsearch_cache_hit_ratio", cache="agent") == 0.5


def test_durations_fill_the_histogram_buckets(redis_client):
    recorder = MetricsRecorder(redis_client)
    for ms in (3, 40, 40, 50, 700, 200_000):  # 50 ms sits exactly on a bound, which is inclusive
        recorder.record_agent_run(AgentRun(agent_id="reranker", stage=Stage.POST_SEARCH, success=True, status="ok",
                                           duration_ms=ms))

    samples = scrape(redis_client)
    buckets = {dict(k)["le"]: v for k, v in samples["agentsearch_agent_duration_seconds_bucket"].items()}
    assert buckets["0.005"] == 1
    assert buckets["0.025"] == 1
    assert buckets["0.05"] == 4
    assert buckets["0.5"] == 4
    assert buckets["1.0"] == 5
    assert buckets["120.0"] == 5
    assert buckets["+Inf"] == 6
    assert value(samples, "agentsearch_agent_duration_seconds_count", agent="reranker") == 6
    assert value(samples, "agentsearch_agent_duration_seconds_sum", agent="reranker") == pytest.approx(200.833)


def test_a_slow_agent_lands_in_the_bucket_of_its_measured_duration(runner, redis_client):
    runner.run(spec("slow"), QUERY, PRE)
    samples = scrape(redis_client)
    assert value(samples, "agentsearch_agent_duration_seconds_bucket", agent="slow", le="0.25") == 0
    assert value(samples, "agentsearch_agent_duration_seconds_bucket", agent="slow", le="+Inf") == 1
    assert value(samples, "agentsearch_agent_duration_seconds_sum", agent="slow") >= 0.3


def test_artifact_sizes_are_a_histogram_per_agent(runner, redis_client):
    inp = ResponseAgentInput(answer="Capacity factors rose.", sources=[], query="q")
    for _ in range(2):
        run, _ = runner.run(spec("memo", stage=Stage.RESPONSE), inp, AgentContext(pipeline_stage=Stage.RESPONSE))
        assert run.status == "ok"
    samples = scrape(redis_client)
    assert value(samples, "agentsearch_artifact_size_bytes_bucket", agent="memo", le="1024.0") == 0
    assert value(samples, "agentsearch_artifact_size_bytes_bucket", agent="memo", le="10240.0") == 2
    assert value(samples, "agentsearch_artifact_size_bytes_sum", agent="memo") == 6000
    # A pre-search agent makes no artifact.
    runner.run(spec("echo"), QUERY, PRE)
    assert ("agent", "echo") not in {k[0] for k in scrape(redis_client)["agentsearch_artifact_size_bytes_count"]}


def test_search_and_embedding_caches_are_counted_from_the_search_metadata(redis_client):
    recorder = MetricsRecorder(redis_client)
    recorder.record_search({"cache_hit": False, "embedding_cache_hit": True})
    recorder.record_search({"cache_hit": False, "embedding_cache_hit": False})
    recorder.record_search({"cache_hit": True, "embedding_cache_hit": False})  # the stored search's flag: ignored
    recorder.record_search({"skipped": True})
    recorder.record_cache("job", hit=True)
    samples = scrape(redis_client)
    assert value(samples, "agentsearch_cache_hits_total", cache="search") == 1
    assert value(samples, "agentsearch_cache_misses_total", cache="search") == 2
    assert value(samples, "agentsearch_cache_hits_total", cache="embedding") == 1
    assert value(samples, "agentsearch_cache_misses_total", cache="embedding") == 1
    assert value(samples, "agentsearch_cache_hit_ratio", cache="job") == 1.0


def test_breaker_state_is_read_from_the_shared_redis_state(runner, redis_client):
    runner.run(spec("echo"), QUERY, PRE)
    runner.run(spec("broken", breaker_fail_max=1), QUERY, PRE)
    gauges = scrape(redis_client)["agentsearch_breaker_state"]
    by_agent = {dict(labels)["agent"]: v for labels, v in gauges.items()}
    assert by_agent == {"echo": 0.0, "broken": 1.0}
    name = next(dict(labels)["breaker"] for labels in gauges if dict(labels)["agent"] == "broken")
    redis_client.set(f"agentsearch:breaker:{name}:pybreaker:state", b"half-open")
    by_agent = {dict(labels)["agent"]: v for labels, v in scrape(redis_client)["agentsearch_breaker_state"].items()}
    assert by_agent["broken"] == 2.0


def test_queue_lengths_count_every_priority_list_of_the_broker(redis_client):
    broker = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    broker.lpush("celery", b"t1", b"t2", b"t3")
    broker.lpush("artifacts\x06\x163", b"t4")
    samples = scrape(redis_client, broker=broker)
    assert value(samples, "agentsearch_queue_length", queue="celery") == 3
    assert value(samples, "agentsearch_queue_length", queue="artifacts") == 1
    assert "agentsearch_queue_length" not in scrape(redis_client)  # no broker to ask (embedded mode)


def test_with_redis_down_the_run_is_unaffected_and_recording_resumes_later(make_runner, fake_server, redis_client):
    recorder = MetricsRecorder(redis_client, retry_after_s=0)
    runner = make_runner(Echo, Broken, metrics=recorder)
    fake_server.connected = False
    run, out = runner.run(spec("echo"), QUERY, PRE)
    assert (run.status, out.query) == ("ok", QUERY.query)
    assert scrape(redis_client) == {"agentsearch_metrics_store_up": {(): 0.0}}

    fake_server.connected = True
    runner.run(spec("broken"), QUERY, PRE)
    samples = scrape(redis_client)
    assert value(samples, "agentsearch_metrics_store_up") == 1
    assert {dict(k)["agent"] for k in samples["agentsearch_agent_runs_total"]} == {"broken"}


def test_recording_pauses_after_a_failure_instead_of_waiting_on_redis_each_run(fake_server, redis_client):
    recorder = MetricsRecorder(redis_client, retry_after_s=60)
    fake_server.connected = False
    recorder.record_cache("job", hit=True)
    fake_server.connected = True
    recorder.record_cache("job", hit=True)  # still paused: dropped
    assert redis_client.hgetall("agentsearch:metrics:cache") == {}


def test_metrics_route_answers_without_credentials(tmp_path, make_runner, redis_client):
    make_runner(Echo).run(spec("echo"), QUERY, PRE)

    class Services:
        settings = Settings(data_dir=tmp_path)
        redis = redis_client

    app = FastAPI()
    app.state.services = Services()
    app.include_router(metrics_route.router)
    response = TestClient(app).get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    families = {f.name for f in text_string_to_metric_families(response.text)}
    assert {"agentsearch_agent_runs", "agentsearch_agent_duration_seconds", "agentsearch_breaker_state"} <= families
    assert 'agentsearch_agent_runs_total{agent="echo",status="ok"} 1.0' in response.text
