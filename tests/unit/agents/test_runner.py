"""AgentRunner: status of every outcome, deadline, shared circuit breaker, result cache (fakeredis only)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import ClassVar

import fakeredis
import pytest
from pydantic import ValidationError

from agentsearch.pipeline.agents.base import (
    AgentArtifact,
    AgentConfig,
    AgentContext,
    AgentResult,
    AgentSkipped,
    PostSearchOutput,
    PreSearchAgent,
    PreSearchInput,
    PreSearchOutput,
    ResponseAgent,
    ResponseAgentInput,
    Source,
    Stage,
)
from agentsearch.pipeline.agents.registry import AgentRegistry
from agentsearch.pipeline.agents.runner import AgentRunner
from agentsearch.pipeline.platform.cache import ResultCache
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.records.agent_runs import AgentSpec

CALLS: Counter[str] = Counter()
_CALLS_LOCK = threading.Lock()
RELEASE_SLEEPERS = threading.Event()


def _called(name: str) -> None:
    with _CALLS_LOCK:
        CALLS[name] += 1


class Echo(PreSearchAgent):
    agent_id = "echo"

    class Config(AgentConfig):
        suffix: str = ""

    def run(self, inp, ctx):
        _called(self.agent_id)
        return PreSearchOutput(query=f"{inp.query}{self.config.suffix}", metadata={"rewritten_by": "echo"})


class Broken(PreSearchAgent):
    """Fails every time; not cacheable so the breaker tests see only the breaker."""

    agent_id = "broken"
    cacheable = False

    class Config(AgentConfig):
        endpoint: str = "https://thesaurus.internal/v1"

    def run(self, inp, ctx):
        _called(self.agent_id)
        raise RuntimeError("thesaurus service returned HTTP 503")


class Flaky(PreSearchAgent):
    """Fails while ``failing`` is set; cacheable, so a success is cached and a failure must not be."""

    agent_id = "flaky"
    failing = True

    def run(self, inp, ctx):
        _called(self.agent_id)
        if Flaky.failing:
            raise ConnectionError("spell-check backend unreachable")
        return PreSearchOutput(query=inp.query.replace("reveune", "revenue"))


class Sleeper(PreSearchAgent):
    agent_id = "sleeper"
    cacheable = False

    def run(self, inp, ctx):
        _called(self.agent_id)
        RELEASE_SLEEPERS.wait(60.0)
        return PreSearchOutput(query=inp.query)


class SlowCacheable(PreSearchAgent):
    agent_id = "slow_cacheable"

    def run(self, inp, ctx):
        _called(self.agent_id)
        time.sleep(0.3)
        return PreSearchOutput(query=f"{inp.query} (expanded)")


class WrongType(PreSearchAgent):
    agent_id = "wrong_type"

    def run(self, inp, ctx):
        _called(self.agent_id)
        return PostSearchOutput(documents=[])


class ReturnsDict(PreSearchAgent):
    agent_id = "returns_dict"

    def run(self, inp, ctx):
        _called(self.agent_id)
        return {"query": inp.query}


class Skipper(PreSearchAgent):
    agent_id = "skipper"

    def run(self, inp, ctx):
        _called(self.agent_id)
        raise AgentSkipped("no glossary configured for this collection")


class EmptyArtifact(ResponseAgent):
    agent_id = "empty_artifact"

    def run(self, inp, ctx):
        _called(self.agent_id)
        return AgentArtifact(agent_id=self.agent_id, type="txt", data=b"", filename="e.txt", content_type="text/plain")


class Memo(ResponseAgent):
    agent_id = "memo"

    def run(self, inp, ctx):
        _called(self.agent_id)
        return AgentArtifact(
            agent_id=self.agent_id, type="txt", data=inp.answer.encode(), filename="memo.txt", content_type="text/plain"
        )


AGENTS = [Echo, Broken, Flaky, Sleeper, SlowCacheable, WrongType, ReturnsDict, Skipper, EmptyArtifact, Memo]
PRE_CTX = AgentContext(pipeline_stage=Stage.PRE_SEARCH)
QUERY = PreSearchInput(query="Q4 reveune of the solar segment", collection_id="c-energy")


@pytest.fixture(autouse=True)
def _fresh_agents():
    CALLS.clear()
    Flaky.failing = True
    RELEASE_SLEEPERS.clear()
    yield
    RELEASE_SLEEPERS.set()  # let timed-out agent threads finish


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(data_dir=tmp_path, breaker_fail_max=5, breaker_reset_timeout_s=60, default_agent_timeout_s=5)


@pytest.fixture
def registry() -> AgentRegistry:
    return AgentRegistry(AGENTS)


@pytest.fixture
def runner(registry, redis_client, settings) -> AgentRunner:
    return AgentRunner(registry, redis_client, settings)


def spec(agent_id: str, **kw) -> AgentSpec:
    stage = kw.pop("stage", Stage.PRE_SEARCH)
    return AgentSpec(agent_id=agent_id, stage=stage, **kw)


# --- outcomes -------------------------------------------------------------------------------------------------


def test_ok_run_returns_the_agent_output_and_a_record(runner):
    run, out = runner.run(spec("echo", config={"suffix": " 2025"}, config_id="cfg-1"), QUERY, PRE_CTX)
    assert out == PreSearchOutput(query="Q4 reveune of the solar segment 2025", metadata={"rewritten_by": "echo"})
    assert (run.status, run.success, run.errors, run.cache_hit) == ("ok", True, None, False)
    assert (run.agent_id, run.config_id, run.stage) == ("echo", "cfg-1", Stage.PRE_SEARCH)
    assert run.duration_ms >= 0 and run.worker
    assert isinstance(run, AgentResult)
    assert CALLS["echo"] == 1


def test_agent_that_raises_is_an_error_with_its_message_and_no_output(runner):
    run, out = runner.run(spec("broken"), QUERY, PRE_CTX)
    assert out is None
    assert (run.status, run.success) == ("error", False)
    assert len(run.errors) == 1
    assert "RuntimeError" in run.errors[0] and "thesaurus service returned HTTP 503" in run.errors[0]


def test_agent_past_its_deadline_times_out_without_the_caller_waiting(runner):
    started = time.perf_counter()
    run, out = runner.run(spec("sleeper", timeout_s=0.2), QUERY, PRE_CTX)
    elapsed = time.perf_counter() - started
    assert (run.status, run.success, out) == ("timeout", False, None)
    assert "0.2" in run.errors[0]
    assert elapsed < 10  # the agent sleeps a minute (until the test ends); the runner stops waiting at 0.2 s
    assert CALLS["sleeper"] == 1


def test_agent_that_returns_another_output_model_is_an_error(runner):
    run, out = runner.run(spec("wrong_type"), QUERY, PRE_CTX)
    assert (run.status, out) == ("error", None)
    assert "TypeError" in run.errors[0]
    assert "PostSearchOutput" in run.errors[0] and "PreSearchOutput" in run.errors[0]


def test_agent_that_returns_a_plain_dict_is_an_error_even_if_it_looks_right(runner):
    run, out = runner.run(spec("returns_dict"), QUERY, PRE_CTX)
    assert (run.status, out) == ("error", None)
    assert "dict" in run.errors[0]


def test_response_agent_with_an_empty_artifact_is_an_error(runner):
    inp = ResponseAgentInput(answer="Revenue grew 18% [1].", sources=[], query="revenue")
    run, out = runner.run(spec("empty_artifact", stage=Stage.RESPONSE), inp,
                          AgentContext(pipeline_stage=Stage.RESPONSE))
    assert (run.status, out) == ("error", None)
    assert "empty artifact" in run.errors[0]


def test_agent_skipped_is_recorded_as_skipped_with_the_reason(runner):
    run, out = runner.run(spec("skipper"), QUERY, PRE_CTX)
    assert (run.status, run.success, out) == ("skipped", False, None)
    assert run.errors == ["no glossary configured for this collection"]


def test_skips_do_not_count_as_failures_for_the_breaker(runner):
    for _ in range(3):
        run, _ = runner.run(spec("skipper", breaker_fail_max=1, cache_ttl_s=0), QUERY, PRE_CTX)
        assert run.status == "skipped"
    assert CALLS["skipper"] == 3


def test_unknown_agent_id_is_an_error_not_an_exception(runner):
    run, out = runner.run(spec("sentiment_analyzer"), QUERY, PRE_CTX)
    assert (run.status, out) == ("error", None)
    assert "UnknownAgent" in run.errors[0] and "sentiment_analyzer" in run.errors[0]


def test_invalid_config_is_an_error_and_the_agent_is_never_called(runner):
    run, out = runner.run(spec("echo", config={"suffix": " 2025", "sufix": "typo"}), QUERY, PRE_CTX)
    assert (run.status, out) == ("error", None)
    assert "ValidationError" in run.errors[0] and "sufix" in run.errors[0]
    assert CALLS["echo"] == 0


# --- circuit breaker ------------------------------------------------------------------------------------------


def test_circuit_opens_after_fail_max_failures_and_the_agent_is_not_called(runner):
    s = spec("broken", breaker_fail_max=2, breaker_reset_timeout_s=30)
    assert [runner.run(s, QUERY, PRE_CTX)[0].status for _ in range(2)] == ["error", "error"]
    run, out = runner.run(s, QUERY, PRE_CTX)
    assert (run.status, run.success, out) == ("circuit_open", False, None)
    assert "circuit open" in run.errors[0]
    assert CALLS["broken"] == 2


def test_settings_fail_max_applies_when_the_spec_has_none(registry, redis_client, tmp_path):
    runner = AgentRunner(registry, redis_client, Settings(data_dir=tmp_path, breaker_fail_max=3))
    statuses = [runner.run(spec("broken"), QUERY, PRE_CTX)[0].status for _ in range(4)]
    assert statuses == ["error", "error", "error", "circuit_open"]
    assert CALLS["broken"] == 3


def test_timeouts_count_as_failures(runner):
    s = spec("sleeper", timeout_s=0.1, breaker_fail_max=1, breaker_reset_timeout_s=30)
    assert runner.run(s, QUERY, PRE_CTX)[0].status == "timeout"
    assert runner.run(s, QUERY, PRE_CTX)[0].status == "circuit_open"
    assert CALLS["sleeper"] == 1


def test_breaker_is_per_agent_and_config(runner):
    """An agent failing with one config must not block the same agent with another config, or another agent."""
    broken = spec("broken", breaker_fail_max=1, breaker_reset_timeout_s=30)
    runner.run(broken, QUERY, PRE_CTX)
    assert runner.run(broken, QUERY, PRE_CTX)[0].status == "circuit_open"
    mirror = spec("broken", config={"endpoint": "https://thesaurus-mirror.internal/v1"}, breaker_fail_max=1)
    assert runner.run(mirror, QUERY, PRE_CTX)[0].status == "error"
    assert CALLS["broken"] == 2
    assert runner.run(spec("echo", breaker_fail_max=1), QUERY, PRE_CTX)[0].status == "ok"


def test_open_circuit_is_seen_by_another_runner_on_the_same_redis(registry, fake_server, settings):
    first = AgentRunner(registry, fakeredis.FakeRedis(server=fake_server), settings)
    other_process = AgentRunner(registry, fakeredis.FakeRedis(server=fake_server), settings)
    s = spec("broken", breaker_fail_max=2, breaker_reset_timeout_s=30)
    first.run(s, QUERY, PRE_CTX)
    first.run(s, QUERY, PRE_CTX)
    assert other_process.run(s, QUERY, PRE_CTX)[0].status == "circuit_open"
    assert CALLS["broken"] == 2
    # A runner on another Redis has its own, closed, circuit.
    elsewhere = AgentRunner(registry, fakeredis.FakeRedis(server=fakeredis.FakeServer()), settings)
    assert elsewhere.run(s, QUERY, PRE_CTX)[0].status == "error"
    assert CALLS["broken"] == 3


def test_failures_in_two_runners_add_up_to_one_count(registry, fake_server, settings):
    a = AgentRunner(registry, fakeredis.FakeRedis(server=fake_server), settings)
    b = AgentRunner(registry, fakeredis.FakeRedis(server=fake_server), settings)
    s = spec("broken", breaker_fail_max=2, breaker_reset_timeout_s=30)
    assert a.run(s, QUERY, PRE_CTX)[0].status == "error"
    assert b.run(s, QUERY, PRE_CTX)[0].status == "error"
    assert a.run(s, QUERY, PRE_CTX)[0].status == "circuit_open"


def _opened_long_ago(redis_client) -> None:
    # pybreaker keeps the opening time in whole seconds; moving it back stands in for waiting the reset timeout.
    for key in redis_client.scan_iter(match="agentsearch:breaker:*:opened_at"):
        redis_client.set(key, int(time.time()) - 120)


def test_after_the_reset_timeout_a_successful_call_closes_the_circuit(runner, redis_client):
    s = spec("flaky", cache_ttl_s=0, breaker_fail_max=2, breaker_reset_timeout_s=60)
    assert [runner.run(s, QUERY, PRE_CTX)[0].status for _ in range(2)] == ["error", "error"]
    assert runner.run(s, QUERY, PRE_CTX)[0].status == "circuit_open"
    assert CALLS["flaky"] == 2

    Flaky.failing = False
    _opened_long_ago(redis_client)
    run, out = runner.run(s, QUERY, PRE_CTX)  # half-open: one trial call goes through
    assert run.status == "ok" and out.query == "Q4 revenue of the solar segment"
    assert CALLS["flaky"] == 3

    # Closed again with a fresh count: one new failure is run (and fails) instead of being refused.
    Flaky.failing = True
    assert runner.run(s, QUERY, PRE_CTX)[0].status == "error"
    assert CALLS["flaky"] == 4


def test_a_failed_trial_call_opens_the_circuit_again(runner, redis_client):
    s = spec("broken", breaker_fail_max=2, breaker_reset_timeout_s=60)
    runner.run(s, QUERY, PRE_CTX)
    runner.run(s, QUERY, PRE_CTX)
    _opened_long_ago(redis_client)
    assert runner.run(s, QUERY, PRE_CTX)[0].status == "error"  # the half-open trial
    assert runner.run(s, QUERY, PRE_CTX)[0].status == "circuit_open"
    assert CALLS["broken"] == 3


def test_sub_second_reset_timeouts_are_refused(tmp_path):
    # pybreaker keeps the opening time in whole seconds, so a shorter reset could admit calls at once.
    with pytest.raises(ValidationError, match="breaker_reset_timeout_s"):
        Settings(data_dir=tmp_path, breaker_reset_timeout_s=0.5)


# --- cache ----------------------------------------------------------------------------------------------------


def test_second_identical_call_is_a_cache_hit_and_does_not_call_the_agent(runner):
    s = spec("echo", config={"suffix": " FY2025"})
    first, out1 = runner.run(s, QUERY, PRE_CTX)
    second, out2 = runner.run(s, QUERY, PRE_CTX)
    assert (first.cache_hit, second.cache_hit) == (False, True)
    assert second.status == "ok" and out2 == out1
    assert CALLS["echo"] == 1


def test_cache_is_shared_by_runners_on_the_same_redis(registry, fake_server, settings):
    s = spec("echo")
    AgentRunner(registry, fakeredis.FakeRedis(server=fake_server), settings).run(s, QUERY, PRE_CTX)
    run, _ = AgentRunner(registry, fakeredis.FakeRedis(server=fake_server), settings).run(s, QUERY, PRE_CTX)
    assert run.cache_hit and CALLS["echo"] == 1


def test_changed_config_or_input_misses_the_cache(runner):
    runner.run(spec("echo", config={"suffix": " FY2025"}), QUERY, PRE_CTX)
    run, out = runner.run(spec("echo", config={"suffix": " FY2024"}), QUERY, PRE_CTX)
    assert not run.cache_hit and out.query.endswith("FY2024")
    run, out = runner.run(spec("echo", config={"suffix": " FY2025"}), PreSearchInput(query="wind revenue"), PRE_CTX)
    assert not run.cache_hit and out.query == "wind revenue FY2025"
    assert CALLS["echo"] == 3


def test_equal_configs_share_a_cache_entry_whatever_their_key_order_or_defaults(runner):
    runner.run(spec("echo", config={}), QUERY, PRE_CTX)
    run, _ = runner.run(spec("echo", config={"suffix": ""}), QUERY, PRE_CTX)  # the default, spelled out
    assert run.cache_hit and CALLS["echo"] == 1


def test_earlier_agent_decisions_are_part_of_the_cache_key(runner):
    runner.run(spec("echo"), QUERY, PRE_CTX)
    earlier = AgentResult(agent_id="language_detector", stage=Stage.PRE_SEARCH, success=True, status="ok",
                          metadata={"language": "de"})
    ctx = AgentContext(pipeline_stage=Stage.PRE_SEARCH, previous_agent_results=[earlier])
    run, _ = runner.run(spec("echo"), QUERY, ctx)
    assert not run.cache_hit and CALLS["echo"] == 2


def test_cache_ttl_zero_disables_the_cache(runner):
    s = spec("echo", cache_ttl_s=0)
    runner.run(s, QUERY, PRE_CTX)
    run, _ = runner.run(s, QUERY, PRE_CTX)
    assert not run.cache_hit and CALLS["echo"] == 2


def test_response_agents_are_never_cached(runner):
    inp = ResponseAgentInput(answer="Revenue grew 18% [1].", sources=[Source(document_id="d1", title="Q4", score=0.9)],
                             query="revenue")
    ctx = AgentContext(pipeline_stage=Stage.RESPONSE)
    runs = [runner.run(spec("memo", stage=Stage.RESPONSE), inp, ctx)[0] for _ in range(2)]
    assert [r.cache_hit for r in runs] == [False, False]
    assert CALLS["memo"] == 2


def test_errors_are_not_cached(runner):
    s = spec("flaky", timeout_s=0.5)
    assert runner.run(s, QUERY, PRE_CTX)[0].status == "error"
    Flaky.failing = False
    run, out = runner.run(s, QUERY, PRE_CTX)
    assert (run.status, run.cache_hit) == ("ok", False)
    assert out.query == "Q4 revenue of the solar segment"
    assert CALLS["flaky"] == 2
    # ... and the success is.
    assert runner.run(s, QUERY, PRE_CTX)[0].cache_hit


def test_a_retry_after_an_error_is_not_held_up_by_the_failed_call(runner):
    s = spec("flaky", timeout_s=30.0)
    assert runner.run(s, QUERY, PRE_CTX)[0].status == "error"
    Flaky.failing = False
    started = time.perf_counter()
    run, _ = runner.run(s, QUERY, PRE_CTX)
    assert run.status == "ok"
    assert time.perf_counter() - started < 10  # a lock the failed call left behind would hold it up 30 s


def test_concurrent_misses_for_one_key_compute_once(runner):
    s = spec("slow_cacheable", timeout_s=10.0)  # the twin waits for the 0.3 s computation up to this long
    runs: list = []
    barrier = threading.Barrier(2)

    def call() -> None:
        barrier.wait()
        runs.append(runner.run(s, QUERY, PRE_CTX))

    threads = [threading.Thread(target=call) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert [r.status for r, _ in runs] == ["ok", "ok"]
    assert {out.query for _, out in runs} == {"Q4 reveune of the solar segment (expanded)"}
    assert CALLS["slow_cacheable"] == 1
    assert sorted(r.cache_hit for r, _ in runs) == [False, True]


# --- ResultCache on its own -----------------------------------------------------------------------------------


def test_result_cache_stores_with_the_ttl_and_hits_afterwards(redis_client):
    cache = ResultCache(redis_client)
    key = cache.key("agent", "echo", "1", "cfg", "input")
    assert key.startswith("agentsearch:cache:") and key.endswith(":echo:1:cfg:input")
    assert cache.get_or_compute(key, 600, 1.0, lambda: '{"query": "q"}') == ('{"query": "q"}', False)
    assert cache.get_or_compute(key, 600, 1.0, lambda: pytest.fail("computed again")) == ('{"query": "q"}', True)
    assert 0 < redis_client.ttl(key) <= 600


def test_result_cache_does_not_store_a_failed_computation(redis_client):
    cache = ResultCache(redis_client)
    key = cache.key("agent", "flaky")

    def fail() -> str:
        raise ValueError("bad output")

    with pytest.raises(ValueError):
        cache.get_or_compute(key, 600, 0.2, fail)
    assert cache.get(key) is None


def test_a_redis_outage_degrades_to_computing_without_the_cache(fake_server):
    fake_server.connected = False
    cache = ResultCache(fakeredis.FakeRedis(server=fake_server))
    assert cache.get_or_compute("agentsearch:cache:k", 60, 0.2, lambda: "fresh") == ("fresh", False)


def test_a_redis_outage_does_not_fail_runs_of_an_agent_already_seen(registry, fake_server, settings):
    runner = AgentRunner(registry, fakeredis.FakeRedis(server=fake_server), settings)
    assert runner.run(spec("echo"), QUERY, PRE_CTX)[0].status == "ok"
    fake_server.connected = False
    run, out = runner.run(spec("echo"), PreSearchInput(query="wind capacity"), PRE_CTX)
    assert (run.status, run.cache_hit, out.query) == ("ok", False, "wind capacity")


def test_a_redis_outage_does_not_make_the_runner_raise(registry, fake_server, settings):
    runner = AgentRunner(registry, fakeredis.FakeRedis(server=fake_server), settings)
    fake_server.connected = False
    run, out = runner.run(spec("echo", config={"suffix": "!"}), QUERY, PRE_CTX)
    assert run.status == "ok" and out.query.endswith("!")


def test_waiter_that_gives_up_on_the_lock_uses_the_value_the_holder_stored(redis_client):
    cache = ResultCache(redis_client)
    key = cache.key("agent", "slow")
    redis_client.set(f"{key}:lock", b"token-of-another-worker", ex=30)  # another worker is computing

    def other_worker_finishes() -> None:
        time.sleep(0.2)
        cache.set(key, "value from the other worker", 60)

    threading.Thread(target=other_worker_finishes).start()
    computed = []
    value, hit = cache.get_or_compute(key, 60, 10.0, lambda: computed.append(1) or "value computed twice")
    assert (value, hit) == ("value from the other worker", True)
    assert computed == []


# --- warm-up ----------------------------------------------------------------------------------------------------


class Warmed(PreSearchAgent):
    """Counts its warm-ups; fails the first one when told to."""

    agent_id = "warmed"
    cacheable = False
    warm_ups: ClassVar[Counter[str]] = Counter()
    fail_next_warm_up = False

    class Config(AgentConfig):
        model: str = "small"

    def warm_up(self):
        Warmed.warm_ups[self.config.model] += 1
        if Warmed.fail_next_warm_up:
            Warmed.fail_next_warm_up = False
            raise OSError("model file missing")

    def run(self, inp, ctx):
        return PreSearchOutput(query=inp.query)


def test_warm_up_runs_once_per_process_for_each_agent_config_before_its_first_run(redis_client, settings):
    Warmed.warm_ups.clear()
    runner = AgentRunner(AgentRegistry([Warmed]), redis_client, settings)
    for _ in range(3):
        assert runner.run(spec("warmed"), QUERY, PRE_CTX)[0].status == "ok"
    runner.run(spec("warmed", config={"model": "large"}), QUERY, PRE_CTX)
    assert Warmed.warm_ups == {"small": 1, "large": 1}


def test_a_failed_warm_up_is_that_runs_error_and_is_tried_again(redis_client, settings):
    Warmed.warm_ups.clear()
    Warmed.fail_next_warm_up = True
    runner = AgentRunner(AgentRegistry([Warmed]), redis_client, settings)
    run, out = runner.run(spec("warmed"), QUERY, PRE_CTX)
    assert (run.status, out) == ("error", None) and "model file missing" in run.errors[0]
    assert runner.run(spec("warmed"), QUERY, PRE_CTX)[0].status == "ok"
    assert Warmed.warm_ups == {"small": 2}
