"""The embedded command's end: a slow shutdown is announced only when the command was stopped early."""

from __future__ import annotations

import threading
import time

from agentsearch.cli.session import stop_serving


def slow_shutdown(seconds: float) -> threading.Thread:
    thread = threading.Thread(target=time.sleep, args=(seconds,), daemon=True)
    thread.start()
    return thread


def test_a_stopped_command_says_it_finishes_the_work_in_flight_and_an_ended_one_stays_quiet(capsys):
    stop_serving(slow_shutdown(0.3), notice_after_s=0.05)
    assert capsys.readouterr().err == "stopping: finishing the work in flight\n"
    # A loaded machine may take seconds to shut the threads down after the work ended: nothing to announce then.
    ended = slow_shutdown(0.3)
    stop_serving(ended, notice_after_s=None)
    assert not ended.is_alive() and capsys.readouterr().err == ""
