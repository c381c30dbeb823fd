"""The Ticker behind every periodic thread (the reapers, the profile schedule, the heartbeats)."""

from __future__ import annotations

import threading
import time

from agentsearch.pipeline.platform.ticker import Ticker


def wait_for(condition, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_it_runs_every_interval_and_a_failed_run_does_not_end_it(caplog):
    calls = []

    def tick() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the database went away")

    ticker = Ticker(tick, 0.02, "test-ticker")
    assert ticker.start()
    try:
        assert wait_for(lambda: len(calls) >= 3)
    finally:
        ticker.stop()
    assert "test-ticker failed" in caplog.text


def test_the_first_run_waits_an_interval_unless_at_once():
    ran = threading.Event()
    late = Ticker(ran.set, 60.0, "test-late")
    late.start()
    assert not ran.wait(0.2)
    late.stop()
    at_once = Ticker(ran.set, 60.0, "test-at-once", at_once=True)
    at_once.start()
    assert ran.wait(5.0)
    at_once.stop()


def test_it_starts_once_and_stops():
    calls = []
    ticker = Ticker(lambda: calls.append(1), 0.02, "test-once")
    assert ticker.start() and not ticker.start()  # a second signal starts no second thread
    assert wait_for(lambda: calls)
    ticker.stop()
    stopped_at = len(calls)
    # The thread ends: no run starts after stop, and one under way at the time finishes.
    assert wait_for(lambda: not [t for t in threading.enumerate() if t.name == "test-once"])
    assert len(calls) <= stopped_at + 1
