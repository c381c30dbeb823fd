"""A task that meets a job without the state it loads ends there, quietly, the job and the reason logged.

The job's row may be gone by the time a late task of it runs (deleted with its collection or user, pruned), or the
job never saved the state the task reads (``agentsearch.pipeline.job.job_store.MissingState``). Nothing is left to do:
raising would only log a task failure nobody can act on, and a retry would meet the same absence. A job whose row is
still there and going is failed with the reason, so that its client learns it now rather than at the deadline.
Every task that loads a job's saved state (the agentic iteration and finish, ``assemble``) is wrapped in
``ends_without_state``. (The steps are handed theirs; the reaper fails a job it cannot enqueue again.)

Usage::

    @app.task(name="agentsearch.my_task")
    @ends_without_state
    def my_task(job_id: str) -> dict[str, Any]:
        state = JobStore(get_services().db).load_state(job_id)    # MissingState -> {"status": "gone", ...}
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any, ParamSpec

from agentsearch.pipeline.job.job_store import JobStore, MissingState
from agentsearch.pipeline.services import get_services

log = logging.getLogger("agentsearch.worker")

P = ParamSpec("P")


def ends_without_state(task: Callable[P, dict[str, Any]]) -> Callable[P, dict[str, Any]]:
    """``task``, ending when it meets a job without its state: a warning names the job and why, a job still going
    fails with that reason, and the task returns ``{"job_id": ..., "status": "gone", "reason": ...}``."""

    @functools.wraps(task)
    def run(*args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        try:
            return task(*args, **kwargs)
        except MissingState as missing:
            log.warning("%s: job %s ends here, %s", task.__name__, missing.job_id, missing.reason)
            if missing.status is not None:
                # A job still going would wait out its deadline for a state that will not come: it fails now,
                # with why (one that has ended is left as it ended).
                JobStore(get_services().db).fail(missing.job_id, f"{task.__name__}: {missing.reason}")
            return {"job_id": missing.job_id, "status": "gone", "reason": missing.reason}

    # Celery checks a call's arguments against the signature it reads without following ``__wrapped__``: the task's
    # own, not ``*args, **kwargs``.
    run.__signature__ = inspect.signature(task)  # type: ignore[attr-defined]
    return run
