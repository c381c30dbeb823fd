"""An agent's deadline: the call runs in a thread of its own and the caller stops waiting when the time is up.

Python cannot kill a thread, so an agent that hangs past its deadline keeps its thread until it returns: the job
goes on without it and the thread is *abandoned*. ``ABANDONED`` counts them in this process. In a prefork worker a
process is cheap to replace; in a thread-pool worker one process serves every concurrent step, so the worker
replaces itself past a cap (``worker.recycling``) instead of piling up hung threads, and ``/metrics`` shows the
count of each worker.

Usage::

    value = call_with_deadline(lambda: agent.run(inp, ctx), timeout_s=5.0, name="translator")
    ABANDONED.current          # threads past their deadline that have not returned yet
"""

from __future__ import annotations

import contextvars
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


def call_with_deadline(fn: Callable[[], T], timeout_s: float, name: str = "agent") -> T:
    """Run ``fn`` in a daemon thread and stop waiting after ``timeout_s`` (raising ``AgentTimeout``)."""
    box: dict[str, Any] = {}
    done = threading.Event()
    # Whether the caller gave up: decided under the lock, so a thread ending just at the deadline is either
    # waited for or counted as abandoned, never both or neither.
    settle = threading.Lock()
    abandoned = False
    # A new thread starts with an empty context: copy it, so the agent's log lines keep their ids and its spans
    # their parent.
    context = contextvars.copy_context()

    def target() -> None:
        try:
            box["value"] = context.run(fn)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller as is
            box["error"] = exc
        finally:
            with settle:
                done.set()
                if abandoned:
                    ABANDONED.returned()

    threading.Thread(target=target, name=f"agentsearch-{name}", daemon=True).start()
    if not done.wait(timeout_s):
        with settle:
            if not done.is_set():
                abandoned = True
                ABANDONED.abandon()
        if abandoned:
            raise AgentTimeout(timeout_s)
    if "error" in box:
        raise box["error"]
    return box["value"]
