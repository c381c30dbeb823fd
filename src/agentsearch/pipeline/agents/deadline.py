"""An agent's deadline: the call runs in a thread of its own and the caller stops waiting when the time is up.

Python cannot kill a thread, so an agent that hangs past its deadline keeps its thread until it returns: the job
goes on without it and the thread is *abandoned*. ``ABANDONED`` counts them in this process. In a prefork worker a
process is cheap to replace; in a thread-pool worker one process serves every concurrent step, so the worker
replaces itself past a cap (``agentsearch.worker.recycling``) instead of piling up hung threads, and ``/metrics`` shows
the count of each worker.

The call runs in a thread kept for agent calls (``_Runner``): starting one per call was a tenth of a no-op agent's
step.

Usage::

    value = call_with_deadline(lambda: agent.run(inp, ctx), timeout_s=5.0, name="translator")
    ABANDONED.current          # threads past their deadline that have not returned yet
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class AgentTimeout(Exception):
    def __init__(self, timeout_s: float) -> None:
        super().__init__(f"agent exceeded its {timeout_s:g} s deadline")


class AbandonedThreads:
    """This process's count of agent threads still running past their deadline, and of all ever abandoned."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.current = 0
        self.total = 0

    def abandon(self) -> None:
        with self._lock:
            self.current += 1
            self.total += 1

    def returned(self) -> None:
        with self._lock:
            self.current -= 1


ABANDONED = AbandonedThreads()


class _Call:
    """One agent call handed to a runner thread, and what came of it."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        # A thread runs with the context it is given: the caller's, so the agent's log lines keep their ids and
        # its spans their parent.
        self.fn, self.context = fn, contextvars.copy_context()
        self.done = threading.Event()
        # Whether the caller gave up: decided under the lock, so a call ending just at the deadline is either
        # waited for or counted as abandoned, never both or neither.
        self.settle = threading.Lock()
        self.abandoned = False
        self.value: Any = None
        self.error: BaseException | None = None


class _Runner:
    """A daemon thread that runs agent calls one after another and goes back to the idle list between them.

    Starting a thread for every call cost about a hundred microseconds on a loaded machine, a tenth of a no-op
    agent's whole step; handing the call to a waiting thread costs a quarter of that. A runner whose call hangs is
    simply not idle: it comes back to the list if the call ever returns.
    """

    def __init__(self, name: str) -> None:
        self._inbox: list[_Call] = []
        self._wake = threading.Condition()
        threading.Thread(target=self._loop, name=name, daemon=True).start()

    def give(self, call: _Call) -> None:
        with self._wake:
            self._inbox.append(call)
            self._wake.notify()

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._inbox:
                    self._wake.wait()
                call = self._inbox.pop()
            try:
                call.value = call.context.run(call.fn)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller as is
                call.error = exc
            finally:
                with call.settle:
                    call.done.set()
                    if call.abandoned:
                        ABANDONED.returned()
            del call
            if not _RUNNERS.back(self):
                return  # enough idle runners already: this one ends


class _RunnerPool:
    """This process's idle runners (a forked child starts with none: its parent's threads are not in it)."""

    MAX_IDLE = 64

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Runner] = []
        self._pid = os.getpid()

    def take(self) -> _Runner:
        with self._lock:
            if self._pid != os.getpid():
                self._idle, self._pid = [], os.getpid()
            if self._idle:
                return self._idle.pop()
        return _Runner("agentsearch-agent")

    def back(self, runner: _Runner) -> bool:
        with self._lock:
            if self._pid != os.getpid() or len(self._idle) >= self.MAX_IDLE:
                return False
            self._idle.append(runner)
            return True


_RUNNERS = _RunnerPool()


def call_with_deadline(fn: Callable[[], T], timeout_s: float, name: str = "agent") -> T:
    """Run ``fn`` in a runner thread and stop waiting after ``timeout_s`` (raising ``AgentTimeout``).

    ``name`` (the agent's) is kept for callers' readability; runner threads are shared, so they are not named by it.
    """
    call = _Call(fn)
    _RUNNERS.take().give(call)
    if not call.done.wait(timeout_s):
        with call.settle:
            if not call.done.is_set():
                call.abandoned = True
                ABANDONED.abandon()
        if call.abandoned:
            raise AgentTimeout(timeout_s)
    if call.error is not None:
        raise call.error
    return call.value
