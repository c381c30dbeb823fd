"""The Celery app, configured from ``pipeline.platform.settings``.

Start a worker with ``agentsearch worker`` (or ``celery -A worker.app worker``). Response agents run on their own
``artifacts`` queue so heavy rendering never starves search.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

from celery import Celery
from celery.signals import (
    beat_init,
    before_task_publish,
    worker_init,
    worker_process_init,
    worker_ready,
    worker_shutdown,
)

from pipeline.platform.settings import get_settings
from pipeline.services import reset_services
from worker import liveness as _liveness  # noqa: F401 - connects the node heartbeat
from worker import observability as _observability  # noqa: F401 - connects the logging and tracing hooks

DEFAULT_QUEUE = "celery"
ARTIFACTS_QUEUE = "artifacts"
# The longest a task may run: the largest agent timeout a config may set (api.schemas, 3600 s) plus the hard-limit
# margin of worker.canvas; and the longest a retry waits before it runs again (worker.tasks backoff cap).
LONGEST_TASK_S = 3600 + 15
LONGEST_RETRY_DELAY_S = 30
# Redis consumes a queue's priority 0 list first and 9 last; a message without a priority goes to 0.
NEW_WORK_PRIORITY = 9
PUBLISH_RETRY = {"max_retries": 6, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 2}
# About a minute: a job's next step is not given up while a broker restarts or fails over.
WORKER_PUBLISH_RETRY = {"max_retries": 22, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 3}
# Probes allow 60 s of silence: several missed beats, not one slow one.
HEARTBEAT_INTERVAL_S = 10.0


log = logging.getLogger("agentsearch.worker")


def create_app() -> Celery:
    settings = get_settings()
    if not settings.embedded and settings.worker_soft_shutdown_timeout_s > 0:
        # SIGTERM (docker stop, a Kubernetes scale-down) would start Celery's warm shutdown, which waits for every
        # running task with no bound; the orchestrator's SIGKILL then strands those messages until the visibility
        # timeout. Remapped, SIGTERM starts the soft shutdown: running tasks get worker_soft_shutdown_timeout, the
        # rest are handed back to the queue at once. billiard reads this when first imported, after this module.
        os.environ.setdefault("REMAP_SIGTERM", "SIGQUIT")
    app = Celery("agentsearch", broker=settings.broker_url, backend=settings.result_backend, include=["worker.tasks", "worker.agentic_tasks", *settings.worker_imports])
    app.conf.update(
        task_default_queue=DEFAULT_QUEUE,
        task_routes={"agentsearch.response_agent": {"queue": ARTIFACTS_QUEUE}},
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        # At-least-once: a task whose worker dies is handed to another; the steps are idempotent for it
        # (worker.tasks: each step's output is kept once per job, so a second run hands on the first one's).
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        # One message per process at a time: a long agent step never holds a second one hostage.
        worker_prefetch_multiplier=1,
        # Not worker_deduplicate_successful_tasks: a chord header task that stored its result but died before the
        # chord counted it would be skipped when redelivered, and the chord would never complete. Run again, it
        # hands on its stored output (the step ledger) and is counted once.
        # Redis redelivers an unacknowledged message after this: above the longest task plus its retry delay
        # (or a running task would be handed to a second worker) and above the job deadline.
        broker_transport_options={"visibility_timeout": int(max(LONGEST_TASK_S + LONGEST_RETRY_DELAY_S,
                                                                settings.job_deadline_s * 2) + 60)},
        # The chord's bookkeeping and each step's result live in the result backend: they must outlive the job.
        result_expires=max(86400, int(settings.job_deadline_s * 4)),
        broker_connection_retry_on_startup=True,
        # A Redis restart takes seconds: publishing waits it out (kombu's default gives up after ~1 s). This is
        # the API's bound (about 8 s, then 503 and the client retries); workers wait longer (_patient_publishing).
        task_publish_retry_policy=PUBLISH_RETRY,
        result_backend_always_retry=True,
        result_backend_max_retries=20,
        # A process that grew past this (a leaky agent, a huge document set) is replaced after its task.
        worker_max_memory_per_child=(settings.worker_max_memory_per_child_mb * 1024) or None,
        # Soft shutdown (Celery 5.5+): on SIGTERM running tasks get this long, then go back to the queue; also
        # when idle, so messages held for a later retry (ETA) are handed back too.
        worker_soft_shutdown_timeout=settings.worker_soft_shutdown_timeout_s,
        worker_enable_soft_shutdown_on_idle=settings.worker_soft_shutdown_timeout_s > 0,
        worker_send_task_events=True,
        task_send_sent_event=True,
        task_track_started=True,
        worker_hijack_root_logger=False,
        # The reaper is not on this schedule: beat runs it in its own process (_start_reaper).
        beat_schedule={
            "run-due-profile-sets": {"task": "agentsearch.run_due_profile_sets",
                                     "schedule": settings.profile_schedule_interval_s},
        },
    )
    return app


app = create_app()
# Canvas signatures are built by task name; every thread (API request handlers included) must resolve them here.
app.set_default()


@before_task_publish.connect
def _work_under_way_goes_first(headers=None, properties=None, **_kwargs) -> None:
    """A message sent from outside any task (a job's first step from the API, a job the reaper enqueues again, an
    ingest) yields to the messages jobs send as they go (their next steps).

    Measured with 500 jobs submitted at once (docs/reliability.md): in one FIFO queue every job took its first step,
    then every job its second, and so on, so all of them ended together at the very end; 495 of 500 passed their
    deadline. Running work in progress first, jobs end one after another and only those that could not have
    started in time wait past their deadline.
    """
    if (headers is not None and properties is not None and headers.get("parent_id") is None
            and properties.get("priority") is None and str(app.conf.broker_url).startswith("redis")):
        properties["priority"] = NEW_WORK_PRIORITY


# The embedding model, loaded once in a prefork worker's main process and inherited by every pool process.
_parent_embedder = None
# Torch threads per pool process: the cores shared out among the processes.
_torch_threads: int | None = None


@worker_init.connect
def _patient_publishing(**_kwargs) -> None:
    # Set in the main process before the pool forks, and before anything was sent: the sender reads it once.
    app.conf.task_publish_retry_policy = WORKER_PUBLISH_RETRY


@worker_init.connect
def _share_cores(sender=None, **_kwargs) -> None:
    """Measured (docs/reliability.md): with two pool processes on two cores, torch's default of one thread per
    core made an extractive answer take 1.12 s instead of 0.31 s with one thread each, the threads of the two
    processes fighting over the same cores."""
    global _torch_threads
    processes = getattr(sender, "concurrency", None)
    # OMP_NUM_THREADS set by the operator wins (e.g. several worker nodes sharing one host's cores).
    if not get_settings().embedded and processes and "OMP_NUM_THREADS" not in os.environ:
        _torch_threads = max(1, len(os.sched_getaffinity(0)) // int(processes))


@worker_init.connect
def _load_model_before_fork(**_kwargs) -> None:
    """A pool process that replaces a dead one is ready at once instead of loading the model again.

    Measured under the kill drill (docs/reliability.md): loading took 12-15 s on a busy 2-core machine, so with a
    process killed every 5 s no replacement ever finished a search. Only loading happens here: the main process
    never embeds, and a forward pass before fork would leave torch's thread pool unusable in the children.
    """
    global _parent_embedder
    settings = get_settings()
    if settings.embedded or not settings.worker_preload_embedder:
        return
    try:
        from pipeline.retrieval.embedder import Embedder

        _parent_embedder = Embedder(settings.embedding_model)
    except Exception:  # noqa: BLE001 - each process then loads it itself, as without preloading
        log.exception("embedding model not preloaded in the main process")


@worker_process_init.connect
def _fresh_clients_after_fork(**_kwargs) -> None:
    # Database pools, Redis sockets and gRPC channels must not be shared with the parent process.
    services = reset_services()
    if _torch_threads is not None and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(_torch_threads)
    if _parent_embedder is not None:
        # Services keeps its loaded model under this name; the weights are shared copy-on-write.
        services.__dict__["_embedder"] = _parent_embedder
    elif services.settings.worker_preload_embedder:
        # Load the model while the process waits for work, so the first search does not pay for it.
        # In a thread: Celery gives a child only a few seconds to report ready.
        threading.Thread(target=lambda: services.embedder, name="agentsearch-preload", daemon=True).start()


_heartbeat_stop = threading.Event()
_heartbeat_started = threading.Lock()


@worker_ready.connect
def _start_heartbeat(**_kwargs) -> None:
    """Touch a file every 10 s: a cheap liveness probe that does not ask the broker anything."""
    settings = get_settings()
    if settings.embedded or not _heartbeat_started.acquire(blocking=False):
        return
    path = settings.worker_heartbeat_file

    def beat() -> None:
        while not _heartbeat_stop.is_set():
            try:
                path.touch()
            except OSError:
                pass
            _heartbeat_stop.wait(HEARTBEAT_INTERVAL_S)

    threading.Thread(target=beat, name="agentsearch-heartbeat", daemon=True).start()


@beat_init.connect
def _start_beat_heartbeat(**_kwargs) -> None:
    # A dedicated `agentsearch beat` gets the same probe as a worker; an embedded beat (worker --beat) shares the
    # worker's file, and touching it twice is harmless.
    _start_heartbeat()
    _start_reaper()


def _start_reaper() -> None:
    """Run the reaper every ``reaper_interval_s`` in beat's own process, not as a queued task.

    Measured under the kill drill (docs/reliability.md): sent as a task, the sweep waited behind the whole backlog
    of job steps, and 104 of 200 jobs ended more than one reaper period after their deadline.
    """
    interval_s = get_settings().reaper_interval_s

    def sweep() -> None:
        from worker.tasks import reap_jobs

        while not _heartbeat_stop.wait(interval_s):
            try:
                reap_jobs()  # called, not sent: it runs here and now
            except Exception:  # noqa: BLE001 - a failed sweep is tried again at the next tick
                log.exception("reaper sweep failed")

    threading.Thread(target=sweep, name="agentsearch-reaper", daemon=True).start()


@worker_shutdown.connect
def _stop_heartbeat(**_kwargs) -> None:
    _heartbeat_stop.set()


def wait_until_ready(timeout_s: float = 30.0) -> None:
    """Block until a worker answers a ping (used by tools that start a worker and then submit)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if app.control.ping(timeout=1.0):
            return
    raise TimeoutError("no Celery worker answered within %.0f s" % timeout_s)
