"""What an agent step costs besides its agent: Redis round trips (the cache's lookup and lock, the runner's reads and
writes, the step ledger), counted on fakeredis as one per packet a client sends (a pipeline is one); and the copy of
the state a step makes."""

from __future__ import annotations

import threading

import fakeredis
import pytest
import redis

from agentsearch.pipeline.agents.base import AgentContext, PreSearchAgent, PreSearchInput, PreSearchOutput, Stage
from agentsearch.pipeline.agents.registry import AgentRegistry
from agentsearch.pipeline.agents.runner import AgentRunner
from agentsearch.pipeline.job.agent_call import pre_search_step
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.ledger import StepLedger
from agentsearch.pipeline.platform import redis_pipelining
from agentsearch.pipeline.platform.cache import ResultCache
from agentsearch.pipeline.platform.redis_pipelining import send
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.records.agent_runs import AgentRun, AgentSpec

CTX = AgentContext(pipeline_stage=Stage.PRE_SEARCH, user_id="u1")
QUERY = PreSearchInput(query="Q4 revenue of the solar segment", collection_id="c-energy")


class Echo(PreSearchAgent):
    agent_id = "echo"

    def run(self, inp, ctx):
        return PreSearchOutput(query=inp.query)


class Failing(PreSearchAgent):
    agent_id = "failing"

    def run(self, inp, ctx):
        raise RuntimeError("backend unreachable")


@pytest.fixture
def trips(monkeypatch):
    """``trips()``: round trips sent by any fakeredis client since the last call (connection handshakes count)."""
    connection = type(fakeredis.FakeRedis().connection_pool.get_connection())
    sent, lock = [0], threading.Lock()
    original = connection.send_packed_command

    def counted(self, command, check_health=True):
        with lock:
            sent[0] += 1
        return original(self, command, check_health)

    monkeypatch.setattr(connection, "send_packed_command", counted)

    def since_last() -> int:
        with lock:
            n, sent[0] = sent[0], 0
        return n

    return since_last


@pytest.fixture
def client(fake_server):
    made = fakeredis.FakeRedis(server=fake_server)
    made.ping()  # the connection's handshake, before anything is counted
    return made


@pytest.fixture
def runner(client, tmp_path) -> AgentRunner:
    return AgentRunner(AgentRegistry([Echo, Failing]), client, Settings(data_dir=tmp_path))


# --- the agent runner -----------------------------------------------------------------------------------------


def test_an_agent_run_that_misses_the_cache_costs_two_round_trips(runner, trips):
    spec = AgentSpec(agent_id="echo", stage=Stage.PRE_SEARCH)
    runner.run(spec, QUERY, CTX)  # the breaker's keys are set up once per process
    trips()
    run, _ = runner.run(spec, QUERY.model_copy(update={"query": "wind output"}), CTX)
    assert (run.status, run.cache_hit) == ("ok", False)
    # The breaker's reading with the cache lookup and lock; the value, the lock's release and the metrics.
    assert trips() == 2


def test_an_agent_run_answered_from_the_cache_costs_two_round_trips(runner, trips):
    spec = AgentSpec(agent_id="echo", stage=Stage.PRE_SEARCH)
    runner.run(spec, QUERY, CTX)
    trips()
    run, _ = runner.run(spec, QUERY, CTX)
    assert run.cache_hit
    assert trips() == 2  # the reading with the lookup; the metrics


def test_a_failed_run_releases_the_lock_and_counts_the_failure(runner, client):
    spec = AgentSpec(agent_id="failing", stage=Stage.PRE_SEARCH, breaker_fail_max=1)
    assert runner.run(spec, QUERY, CTX)[0].status == "error"
    assert not [k for k in client.keys("agentsearch:cache:*") if k.endswith(b":lock")]
    assert runner.run(spec, QUERY, CTX)[0].status == "circuit_open"
    assert not client.keys("agentsearch:cache:*")  # neither a value nor a lock left by the refused call


def test_the_runs_writes_reach_redis_when_the_metrics_are_counted_elsewhere(client, tmp_path, fake_server):
    from agentsearch.pipeline.observability.metrics import AGENT_RUNS_KEY, MetricsRecorder

    elsewhere = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    runner = AgentRunner(AgentRegistry([Echo]), client, Settings(data_dir=tmp_path),
                         metrics=MetricsRecorder(elsewhere))
    runner.run(AgentSpec(agent_id="echo", stage=Stage.PRE_SEARCH), QUERY, CTX)
    assert elsewhere.hgetall(AGENT_RUNS_KEY) and not client.exists(AGENT_RUNS_KEY)
    assert runner.run(AgentSpec(agent_id="echo", stage=Stage.PRE_SEARCH), QUERY, CTX)[0].cache_hit


# --- the result cache -----------------------------------------------------------------------------------------


def test_a_lookup_reads_the_callers_keys_along_and_takes_the_lock_in_one_round_trip(client, trips):
    cache = ResultCache(client)
    client.set("breaker:state", b"closed")
    trips()
    lookup = cache.lookup("k", 5.0, read_along=("breaker:state", "breaker:missing"))
    assert trips() == 1
    assert (lookup.value, lookup.busy, lookup.along) == (None, False, (b"closed", None))
    assert lookup.token is not None and client.get("k:lock") == lookup.token.encode()


def test_the_value_and_the_locks_release_go_in_the_callers_pipeline(client, trips):
    cache = ResultCache(client)
    lookup = cache.lookup("k", 5.0)
    writes = client.pipeline(transaction=False)
    cache.store(writes, lookup, '{"query": "q"}', ttl_s=600)
    writes.hincrby("caller:counts", "runs", 1)
    trips()
    assert send(writes)
    assert trips() == 1
    assert client.get("k") == b'{"query": "q"}' and not client.exists("k:lock")
    assert cache.lookup("k", 5.0).value == '{"query": "q"}'


def test_a_twin_waits_for_the_holders_value(client):
    cache = ResultCache(client)
    holder = cache.lookup("k", 5.0)
    twin = cache.lookup("k", 5.0)
    assert twin.busy and twin.token is None

    def finish() -> None:
        writes = client.pipeline(transaction=False)
        cache.store(writes, holder, "value", ttl_s=600)
        send(writes)

    threading.Timer(0.1, finish).start()
    assert cache.wait(twin, 5.0).value == "value"


def test_a_twin_that_waited_too_long_computes_without_the_lock(client):
    cache = ResultCache(client)
    cache.lookup("k", 5.0)
    waited = cache.wait(cache.lookup("k", 0.1), 0.1)
    assert (waited.value, waited.token, waited.busy) == (None, None, False)


def test_a_lock_is_released_only_by_its_holder(client):
    cache = ResultCache(client)
    stale = cache.lookup("k", 5.0)
    client.delete("k:lock")  # it expired; a twin took the lock since
    twin = cache.lookup("k", 5.0)
    writes = client.pipeline(transaction=False)
    cache.release(writes, stale)
    send(writes)
    assert client.get("k:lock") == twin.token.encode()


# --- the step ledger ------------------------------------------------------------------------------------------


def test_the_first_output_stored_costs_one_round_trip_and_is_not_read_back(client, trips):
    ledger = StepLedger(client, ttl_s=3600)
    output = {"job_id": "j1", "query": "q"}
    trips()
    assert ledger.put("j1", "pre_search:echo::0", output) is output
    assert trips() == 1
    assert 0 < client.ttl("agentsearch:steps:j1") <= 3600


def test_a_second_copy_of_a_step_hands_on_the_first_output(client):
    ledger = StepLedger(client, ttl_s=3600)
    ledger.put("j1", "pre_search:echo::0", {"query": "first"})
    assert ledger.put("j1", "pre_search:echo::0", {"query": "second"}) == {"query": "first"}
    assert ledger.get("j1", "pre_search:echo::0") == {"query": "first"}


def test_a_read_asked_ahead_answers_what_get_would_and_gives_its_connection_back(client, trips):
    ledger = StepLedger(client, ttl_s=3600)
    ledger.put("j1", "pre_search:echo::0", {"query": "first"})
    trips()
    answer = ledger.ask("j1", "pre_search:echo::0")
    assert trips() == 1  # sent before its answer is read
    assert answer() == {"query": "first"}
    assert trips() == 0
    assert ledger.ask("j1", "pre_search:other::0")() is None
    assert not client.connection_pool._in_use_connections


def test_a_read_asked_ahead_of_a_redis_that_is_down_lets_the_step_run(fake_server):
    ledger = StepLedger(fakeredis.FakeRedis(server=fake_server), ttl_s=3600)
    fake_server.connected = False
    assert ledger.ask("j1", "answer")() is None
    fake_server.connected = True
    assert ledger.ask("j1", "answer")() is None
    assert not ledger.client.connection_pool._in_use_connections


# --- the state a step hands on --------------------------------------------------------------------------------


def test_a_pre_search_step_hands_on_a_new_state_and_leaves_the_one_it_was_given(runner):
    earlier = AgentRun(agent_id="language_detector", stage=Stage.PRE_SEARCH, success=True, status="ok")
    given = JobState(job_id="j1", collection_id="c-energy", user_id="u1", query="Q4 revenue",
                     metadata={"language": {"code": "en"}}, agent_runs=[earlier])
    before = given.dump()
    out = pre_search_step(given, AgentSpec(agent_id="echo", stage=Stage.PRE_SEARCH), runner)
    assert given.dump() == before
    assert [r.agent_id for r in out.agent_runs] == ["language_detector", "echo"]
    out.metadata["language"]["code"] = "de"
    assert given.metadata == {"language": {"code": "en"}}


# --- answers read later ---------------------------------------------------------------------------------------


def test_within_a_scope_writes_are_sent_at_once_and_their_answers_read_when_it_ends(client, trips):
    writes = client.pipeline(transaction=False)
    writes.set("k", "v")
    writes.hincrby("counts", "runs", 1)
    trips()
    with redis_pipelining.scope():
        assert send(writes)
        assert trips() == 1 and client.get("k") == b"v"  # the server has it; the answers wait in the socket
        assert len(client.connection_pool._in_use_connections) == 1
    assert not client.connection_pool._in_use_connections


def test_a_thread_other_than_the_scopes_reads_its_answers_at_once(client):
    import contextvars

    writes = client.pipeline(transaction=False)
    writes.set("k", "v")
    with redis_pipelining.scope():
        context = contextvars.copy_context()  # what an agent's deadline thread starts with
        sent = []
        thread = threading.Thread(target=lambda: sent.append(context.run(send, writes)))
        thread.start()
        thread.join()
        assert sent == [True] and not client.connection_pool._in_use_connections


def test_answers_read_later_come_in_order_with_an_error_in_its_place(client):
    client.set("text", "not a number")
    read = redis_pipelining.send_commands(client, [("INCR", "text"), ("GET", "text")])
    error, value = read()
    assert isinstance(error, redis.ResponseError) and value == b"not a number"
    assert not client.connection_pool._in_use_connections


def test_writes_to_a_redis_that_is_down_are_reported_and_nothing_is_held(fake_server, client):
    writes = client.pipeline(transaction=False)
    writes.set("k", "v")
    fake_server.connected = False
    with redis_pipelining.scope():
        assert not send(writes)
    assert not client.connection_pool._in_use_connections
