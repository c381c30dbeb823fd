"""The Ticker: a function run every few seconds in a daemon thread, for as long as the process lives or until stopped.

What runs this way: the embedded mode's stand-ins for Celery beat (the reaper and the profile schedule, in the API
process), a worker's liveness file and its node key, and beat's reaper sweep. A run that fails is logged and the
next one comes at the next tick: one lost sweep or heartbeat must not end the thread that makes the later ones.

Usage::

    reaper = Ticker(jobs.reap, interval_s=30, name="agentsearch-reaper")
    reaper.start()               # first run after 30 s; Ticker(..., at_once=True) runs the first one at start
    ...
    reaper.stop()                # no run starts after this; one under way finishes
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("agentsearch.ticker")


class Ticker:
    """Calls ``tick`` every ``interval_s`` in a daemon thread named ``name``; ``start`` begins it once."""

    def __init__(self, tick: Callable[[], Any], interval_s: float, name: str, *, at_once: bool = False) -> None:
        self.tick, self.interval_s, self.name, self.at_once = tick, interval_s, name, at_once
        self._stop = threading.Event()
        self._started = False
        self._starting = threading.Lock()

    def start(self) -> bool:
        """Start the thread; False when it was started before (a second signal, a process forked after start)."""
        with self._starting:
            if self._started:
                return False
            self._started = True
        threading.Thread(target=self._run, name=self.name, daemon=True).start()
        return True

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        if self.at_once and not self._stop.is_set():
            self._run_once()
        while not self._stop.wait(self.interval_s):
            self._run_once()

    def _run_once(self) -> None:
        try:
            self.tick()
        except Exception:  # tried again at the next tick
            log.exception("%s failed; trying again in %g s", self.name, self.interval_s)
