"""An agent's deadline: values and errors come back, a hung call is abandoned and counted, threads are reused."""

from __future__ import annotations

import contextvars
import threading
import time

import pytest

from agentsearch.pipeline.agents.deadline import _RUNNERS, ABANDONED, AgentTimeout, call_with_deadline

REQUEST = contextvars.ContextVar("request", default=None)


def test_the_value_the_error_and_the_callers_context_come_through():
    REQUEST.set("job-1")
    assert call_with_deadline(lambda: REQUEST.get(), 5) == "job-1"
    with pytest.raises(KeyError, match="boom"):
        call_with_deadline(lambda: {}["boom"], 5)


def test_a_hung_call_is_abandoned_counted_and_uncounted_when_it_returns():
    release, returned = threading.Event(), threading.Event()
    before_current, before_total = ABANDONED.current, ABANDONED.total

    def hang() -> str:
        release.wait()
        returned.set()
        return "late"

    with pytest.raises(AgentTimeout):
        call_with_deadline(hang, 0.05)
    assert (ABANDONED.current, ABANDONED.total) == (before_current + 1, before_total + 1)
    release.set()
    assert returned.wait(5)
    deadline = time.monotonic() + 10
    while ABANDONED.current != before_current and time.monotonic() < deadline:  # it settles just after returning
        time.sleep(0.01)
    assert (ABANDONED.current, ABANDONED.total) == (before_current, before_total + 1)


def test_calls_one_after_another_reuse_a_runner_thread(monkeypatch):
    back, returned = _RUNNERS.back, []

    def back_and_tell(runner) -> bool:
        kept = back(runner)
        returned.append(threading.get_ident())
        return kept

    monkeypatch.setattr(_RUNNERS, "back", back_and_tell)
    first = call_with_deadline(threading.get_ident, 5)
    # The runner goes back to the idle list just after its call returns; the next call takes the last one back.
    deadline = time.monotonic() + 10
    while first not in returned and time.monotonic() < deadline:
        time.sleep(0.01)
    second = call_with_deadline(threading.get_ident, 5)
    assert first == second != threading.get_ident()


def test_concurrent_calls_each_get_their_own_answer():
    results: dict[int, int] = {}

    def caller(i: int) -> None:
        results[i] = call_with_deadline(lambda: i * i, 5)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {i: i * i for i in range(40)}
