"""AgentBreaker on its own (fakeredis): one read per call, a write only when a call changes the circuit."""

from __future__ import annotations

import time

import fakeredis
import pybreaker
import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from agentsearch.pipeline.platform.breakers import UNREAD, AgentBreaker

FAILURE = RuntimeError("thesaurus service returned HTTP 503")


class CountingRedis(fakeredis.FakeRedis):
    """Remembers the name of every command sent on its own (pipelines aside), writes and reads alike."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.commands: list[str] = []

    def execute_command(self, *args, **options):
        self.commands.append(str(args[0]).upper())
        return super().execute_command(*args, **options)


@pytest.fixture
def redis_client(fake_server):
    return CountingRedis(server=fake_server)


def breaker(client, fail_max: int = 2, reset_timeout_s: float = 60) -> AgentBreaker:
    made = AgentBreaker("translator:user:u1:ab12", client, fail_max=fail_max, reset_timeout_s=reset_timeout_s)
    client.commands.clear()  # pybreaker's storage sets its keys up once, when made
    return made


def called(b: AgentBreaker, error: BaseException | None) -> bool:
    """One call as the runner makes it: read, ask, record. Whether it was admitted."""
    reading = b.read()
    if not b.admits(reading):
        return False
    b.record(error, reading)
    return True


def test_a_success_on_a_quiet_circuit_reads_once_and_writes_nothing(redis_client):
    b = breaker(redis_client)
    assert called(b, None)
    assert redis_client.commands == ["MGET"]
    assert (b.state, b.fail_counter) == ("closed", 0)


def test_it_still_opens_after_fail_max_failures_and_refuses_until_the_reset_timeout(redis_client):
    b = breaker(redis_client, fail_max=2)
    assert called(b, FAILURE) and called(b, FAILURE)
    assert b.state == "open"
    assert not called(b, None)
    assert not b.admits(b.read())


def test_a_success_after_counted_failures_clears_the_count(redis_client):
    b = breaker(redis_client, fail_max=3)
    called(b, FAILURE)
    assert b.fail_counter == 1
    redis_client.commands.clear()
    assert called(b, None)
    assert b.fail_counter == 0
    assert "SET" in redis_client.commands  # not quiet: the success is written


def _opened_long_ago(client, b: AgentBreaker) -> None:
    # pybreaker keeps the opening time in whole seconds; moving it back stands in for waiting the reset timeout.
    client.set(b.keys[2], int(time.time()) - 120)


def test_after_the_reset_timeout_a_success_in_half_open_closes_the_circuit(redis_client):
    b = breaker(redis_client, fail_max=2, reset_timeout_s=60)
    called(b, FAILURE)
    called(b, FAILURE)
    assert not b.admits(b.read())
    _opened_long_ago(redis_client, b)
    reading = b.read()
    assert reading.state == "open" and b.admits(reading)  # the trial call
    b.record(None, reading)
    assert (b.state, b.fail_counter) == ("closed", 0)
    # Closed with a fresh count: one new failure does not open it.
    assert called(b, FAILURE) and b.state == "closed"


def test_a_failed_trial_call_opens_the_circuit_again(redis_client):
    b = breaker(redis_client, fail_max=2, reset_timeout_s=60)
    called(b, FAILURE)
    called(b, FAILURE)
    _opened_long_ago(redis_client, b)
    assert called(b, FAILURE)
    assert b.state == "open"
    assert not called(b, None)


def test_failures_recorded_by_another_process_are_not_cleared_by_a_call_admitted_before_them(fake_server):
    here = breaker(CountingRedis(server=fake_server), fail_max=3)
    there = breaker(CountingRedis(server=fake_server), fail_max=3)
    reading = here.read()  # quiet when this call began
    called(there, FAILURE)
    called(there, FAILURE)
    here.record(None, reading)
    assert here.fail_counter == 2  # kept: the next failure anywhere opens the circuit
    called(there, FAILURE)
    assert here.state == "open"


def test_a_reading_decodes_what_was_read_along_with_something_else(redis_client):
    b = breaker(redis_client, fail_max=1)
    called(b, FAILURE)
    reading = b.reading(redis_client.mget(b.keys))
    assert (reading.state, reading.failures) == ("open", 1)
    assert reading.opened_at is not None and not b.admits(reading)
    assert b.reading(()) is UNREAD  # nothing read (Redis could not be asked): the call goes through


def test_an_unreadable_redis_admits_the_call_and_records_nothing_on_success(redis_client, monkeypatch):
    b = breaker(redis_client)

    def down(*args, **kwargs):
        raise RedisConnectionError("Connection refused")

    monkeypatch.setattr(redis_client, "mget", down)
    reading = b.read()
    assert reading is UNREAD and b.admits(reading)
    b.record(None, reading)  # nothing to write, nothing raised


def test_in_memory_the_reading_is_the_storage_itself():
    b = AgentBreaker("local", None, fail_max=1, reset_timeout_s=60)
    assert b.keys == ()
    assert b.read().quiet
    b.record(FAILURE, b.read())
    assert b.read().state == pybreaker.STATE_OPEN and not b.admits()
