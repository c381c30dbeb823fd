"""A thread-pool worker replaces itself when hung agents have taken too many of its threads.

An agent past its deadline is abandoned, not stopped (``agentsearch.pipeline.agents.deadline``): its thread runs on
until the agent returns. In a thread-pool worker every step shares one process, and Celery enforces no time limit there,
so hung agents would pile up in it without bound. After every task this module looks at the process's count of
abandoned threads:

- it is published for ``/metrics`` (``agentsearch_worker_abandoned_threads{worker}``) whenever it changed;
- past ``worker_max_abandoned_threads`` a thread-pool worker stops taking messages, lets its running steps finish
  (a warm shutdown, as on SIGTERM); ``agentsearch worker`` then starts the same command afresh in the same
  process (``os.execv``), which ends every hung thread. Messages it had not started go back to the queue (late
  acknowledgement), so nothing is lost and nothing runs twice (the step ledger).

Usage: nothing to call; ``agentsearch.worker.lifecycle`` calls ``watch(threads_pool=...)`` as the worker starts.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery.signals import task_postrun
from celery.worker import state as worker_state

from agentsearch.pipeline.agents.deadline import ABANDONED
from agentsearch.pipeline.agents.runner import worker_name
from agentsearch.pipeline.platform.settings import get_settings
from agentsearch.pipeline.services import get_services

log = logging.getLogger("agentsearch.worker")

# The worker's exit status when it stops to start afresh (EX_TEMPFAIL: "try again later"); `agentsearch worker`
# asks ``requested()`` rather than the status, which Celery's command does not hand back.
EX_RECYCLE = 75

_lock = threading.Lock()
_watching: dict[str, Any] = {"threads_pool": False, "published": (0, 0), "recycling": False}


def watch(threads_pool: bool) -> None:
    """Start watching this process; ``threads_pool``: it runs its steps in threads (recycling applies)."""
    with _lock:
        _watching["threads_pool"] = threads_pool
        _watching["recycling"] = False
    publish(force=True)


def publish(force: bool = False) -> None:
    """The count for ``/metrics``, written only when it changed (one Redis round trip then, none otherwise)."""
    figures = (ABANDONED.current, ABANDONED.total)
    with _lock:
        if figures == _watching["published"] and not force:
            return
        _watching["published"] = figures
    get_services().metrics.record_abandoned_threads(worker_name(), *figures)


def requested() -> bool:
    """Whether this process stopped to start afresh (what ``agentsearch worker`` asks once Celery returns)."""
    with _lock:
        return _watching["recycling"]


def over_cap() -> bool:
    return ABANDONED.current >= get_settings().worker_max_abandoned_threads


@task_postrun.connect
def _after_task(**_kwargs: Any) -> None:
    publish()
    with _lock:
        if not _watching["threads_pool"] or _watching["recycling"] or not over_cap():
            return
        _watching["recycling"] = True
    log.error("%d agent threads are past their deadline in this worker (cap %d): finishing the running steps and "
              "starting afresh", ABANDONED.current, get_settings().worker_max_abandoned_threads)
    get_services().metrics.record_recycle(worker_name())
    # What Celery's own SIGTERM handler does for a warm shutdown: the consumer stops at its next loop, the pool
    # finishes what it runs, and the worker exits with this status.
    worker_state.should_stop = EX_RECYCLE
