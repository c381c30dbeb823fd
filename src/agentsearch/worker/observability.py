"""Celery's hooks for logs and traces in worker processes (``agentsearch.worker.app`` names it in ``HOOK_MODULES``).

- ``setup_logging``: Celery leaves logging to ``agentsearch.pipeline.observability.logs`` (text or JSON by setting).
- ``task_prerun``/``task_postrun``: every log line of a task carries its ``task_id`` and the ``job_id`` it serves.
- ``worker_process_init``/``worker_process_shutdown``: each prefork process has its own tracer provider (its
  exporter thread would not survive the fork) and flushes it on the way out.

A job's own trace ends with it: ``agentsearch.pipeline.job.workflow.end_job_trace`` emits its root span.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from celery.signals import setup_logging, task_postrun, task_prerun, worker_process_init, worker_process_shutdown

from agentsearch.pipeline.observability import tracing
from agentsearch.pipeline.observability.logs import configure_logging, push_context
from agentsearch.pipeline.platform.settings import get_settings

log = logging.getLogger("agentsearch.worker")

_restore: dict[str, Callable[[], None]] = {}
_restore_lock = threading.Lock()


def job_id_of(args: Any, kwargs: Any) -> str | None:
    """The job a task serves: a ``job_id`` keyword (assemble, job_failed), else the state it was handed."""
    if isinstance(kwargs, dict) and isinstance(kwargs.get("job_id"), str):
        return kwargs["job_id"]
    first = args[0] if isinstance(args, (list, tuple)) and args else None
    if isinstance(first, list) and first:
        first = first[0]  # merge_search: the states of a search group
    if isinstance(first, dict) and isinstance(first.get("job_id"), str):
        return first["job_id"]
    return None


@setup_logging.connect
def _setup_logging(loglevel: int | str | None = None, **_kwargs: Any) -> None:
    settings = get_settings()
    # AGENTSEARCH_LOG_LEVEL wins when it is set; otherwise the worker's own --loglevel.
    level = settings.log_level if "log_level" in settings.model_fields_set else (loglevel or settings.log_level)
    configure_logging(settings.log_format, level)


@task_prerun.connect
def _bind_task_ids(task_id: str | None = None, args: Any = None, kwargs: Any = None, **_kwargs: Any) -> None:
    if task_id is None:
        return
    restore = push_context(job_id=job_id_of(args, kwargs), task_id=task_id)
    with _restore_lock:
        _restore[task_id] = restore


@task_postrun.connect
def _unbind_task_ids(task_id: str | None = None, **_kwargs: Any) -> None:
    with _restore_lock:
        restore = _restore.pop(task_id or "", None)
    if restore is not None:
        try:
            restore()
        except (ValueError, RuntimeError):
            pass  # bound in another context (a pool that runs the signals apart): nothing of ours to restore


@worker_process_init.connect
def _start_tracing(**_kwargs: Any) -> None:
    tracing.configure_tracing(get_settings().otel_exporter, "agentsearch-worker")


@worker_process_shutdown.connect
def _stop_tracing(**_kwargs: Any) -> None:
    tracing.shutdown_tracing()

