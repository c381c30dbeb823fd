"""The Celery app and its configuration, from ``agentsearch.pipeline.platform.settings``; no task and no worker hook
lives here.

Start a worker with ``agentsearch worker`` (or ``celery -A agentsearch.worker.app worker``). The job's steps (agents,
search, the answer) are on the default queue, ``celery``: they mostly wait, and a thread-pool worker runs many of them
at once. Response agents (rendering) and ingestion (embedding) compute: they have queues of their own, ``artifacts``
and ``ingest``, for prefork workers, so that heavy work never starves search. Webhook deliveries wait on receivers:
their queue, ``webhooks``, is for a thread-pool worker too.

A worker or beat process imports ``TASK_MODULES`` (the tasks) and ``HOOK_MODULES`` (what runs on Celery's signals:
``agentsearch.worker.lifecycle``, ``agentsearch.worker.liveness``, ``agentsearch.worker.observability``,
``agentsearch.worker.recycling``, ``agentsearch.worker.warmup``) when it starts, before the first signal; this module
imports none of them, so none of them makes a circle with it.

Usage::

    from agentsearch.worker.app import app, DB_RETRY

    @app.task(name="agentsearch.my_step", **DB_RETRY)
    def my_step(state: dict) -> dict: ...
"""

from __future__ import annotations

import os
import time
from contextvars import ContextVar

from celery import Celery
from celery.signals import before_task_publish

from agentsearch.pipeline.job import step_protocol
from agentsearch.pipeline.platform.settings import Settings, get_settings

DEFAULT_QUEUE = "celery"
ARTIFACTS_QUEUE = "artifacts"
INGEST_QUEUE = "ingest"
# Webhook deliveries wait on other people's servers: a queue of their own, so a slow receiver never delays a job.
WEBHOOKS_QUEUE = "webhooks"
ALL_QUEUES = (DEFAULT_QUEUE, ARTIFACTS_QUEUE, INGEST_QUEUE, WEBHOOKS_QUEUE)
# How long a task's own Redis work (storing its result, a chord counting it, publishing its next step) waits for a
# Redis that went away (a restart, a failover) before the task gives up: agentsearch.worker.job_tasks leaves this much
# room in every task's time limits beside its work's own bound, so the wait never cuts a step that did its work in time.
REDIS_OUTAGE_WAIT_S = 60
# The longest a task may run: the largest agent timeout a config may set (agentsearch.api.schemas, 3600 s) plus the
# hard-limit margin of agentsearch.worker.job_tasks; and the longest a retry waits before it runs again (the backoff cap
# of the steps).
LONGEST_TASK_S = 3600 + 15 + REDIS_OUTAGE_WAIT_S
LONGEST_RETRY_DELAY_S = step_protocol.LONGEST_RETRY_DELAY_S
# Redis consumes a queue's priority 0 list first and 9 last; a message without a priority goes to 0.
NEW_WORK_PRIORITY = 9
# The API's publish (a job's first step, an ingest, a webhook delivery) gives up at its first failure past this, and
# the client gets 503 and sends again with its Idempotency-Key. Bounded in time, not only in tries: kombu's count
# of tries nests (each failed publish reconnects with the tries left), and behind a partition every connect and
# every read waits REDIS_TIMEOUT_S before it fails, so six tries held a submission for the whole 30 s of a cut.
PUBLISH_WITHIN_S = 8.0
_publish_started: ContextVar[float | None] = ContextVar("publish_started", default=None)


def _past_the_publish_bound(exc: BaseException, _interval: float) -> None:
    """kombu's errback, called at each failed try of a publish before it sleeps and tries again: the failure goes
    to the sender once the publish has taken ``PUBLISH_WITHIN_S`` (counted from ``before_task_publish``)."""
    started = _publish_started.get()
    if started is not None and time.monotonic() - started > PUBLISH_WITHIN_S:
        raise exc


PUBLISH_RETRY = {"max_retries": 6, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 2,
                 "errback": _past_the_publish_bound}
# About a minute (REDIS_OUTAGE_WAIT_S): a job's next step is not given up while a broker restarts or fails over.
WORKER_PUBLISH_RETRY = {"max_retries": 22, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 3}
# The database going away is waited out by retrying the step with backoff (agentsearch.pipeline.job.step_protocol).
DB_UNAVAILABLE = step_protocol.DATABASE_AWAY
DB_RETRY = dict(autoretry_for=DB_UNAVAILABLE, retry_backoff=1, retry_backoff_max=LONGEST_RETRY_DELAY_S,
                retry_jitter=False, max_retries=step_protocol.DATABASE_RETRIES)
# The result backend's retries of a read or write while Redis is away: each sleep drawn between 0 and min(1 s,
# 10 ms x 2^n), so about REDIS_OUTAGE_WAIT_S in all. Celery's sleeps grow to 10 s: a chord's response agent that
# stored its result during a 10 s restart woke up to 10 s after Redis was back, and its soft time limit (15 s for
# a 10 s agent) ended it, failing its job's chord.
RESULT_RETRY_SLEEP_MAX_MS = 1000
RESULT_RETRIES = 2 * REDIS_OUTAGE_WAIT_S + 8
# What a worker (and beat) imports as it starts: every task, and the modules whose functions Celery's signals call.
TASK_MODULES = [f"agentsearch.worker.{name}" for name in (
    "job_tasks", "ingestion", "parsing", "reaper", "agentic_tasks", "webhooks", "retention", "sources")]
HOOK_MODULES = [f"agentsearch.worker.{name}" for name in (
    "lifecycle", "liveness", "observability", "recycling", "warmup")]


def redis_timeouts(timeout_s: float, prefix: str) -> dict:
    """A Redis connection's connect and read timeouts and TCP keepalive, named with ``prefix``: ``socket_`` for
    kombu's transport options, ``redis_socket_`` for the result backend's settings.

    Usage: ``redis_timeouts(5.0, "socket_")`` is ``{"socket_timeout": 5.0, "socket_connect_timeout": 5.0,
    "socket_keepalive": True}``.
    """
    return {f"{prefix}timeout": timeout_s, f"{prefix}connect_timeout": timeout_s, f"{prefix}keepalive": True}


def broker_transport_options(settings: Settings) -> dict:
    """kombu's transport options of the broker ``settings`` name: Redis's timeouts, and with the memory broker the
    sleep between two polls of an empty queue.

    Usage: ``app.conf.broker_transport_options = broker_transport_options(get_settings())``.
    """
    # Redis redelivers an unacknowledged message after this: above the longest task plus its retry delay (or a
    # running task would be handed to a second worker) and above the job deadline.
    options = {"visibility_timeout": int(max(LONGEST_TASK_S + LONGEST_RETRY_DELAY_S, settings.job_deadline_s * 2) + 60),
               # A partition drops packets without closing the connection: without a timeout a publish or an ack
               # waits on it for good (kombu's default). BRPOP is not held to it; kombu drops a BRPOP connection
               # silent past its health check instead.
               **redis_timeouts(settings.redis_timeout_s, "socket_")}
    if settings.embedded:
        # The memory transport cannot block on a queue: a worker thread that found its queues empty waits for the
        # next publish (agentsearch.worker.memory_broker), at most polling_interval (kombu's sleep, 1 s by default).
        # Redis reads the same option as its BRPOP timeout, so it is set for the memory broker only.
        options["polling_interval"] = settings.embedded_poll_s
    return options


def broker_transport(settings: Settings) -> str | None:
    """kombu's transport for the broker ``settings`` name, where the service has its own; None: the URL's scheme
    chooses kombu's.

    Usage: ``app.conf.broker_transport = broker_transport(get_settings())``.
    """
    if settings.embedded:
        return "agentsearch.worker.memory_broker:Transport"  # consumers woken by a publish rather than a timer
    if (settings.broker_url or "").startswith(("redis://", "rediss://")):
        return "agentsearch.worker.redis_broker:Transport"  # one Redis client per channel, not one per command
    return None


def create_app() -> Celery:
    settings = get_settings()
    if not settings.embedded and settings.worker_soft_shutdown_timeout_s > 0:
        # SIGTERM (docker stop, a Kubernetes scale-down) would start Celery's warm shutdown, which waits for every
        # running task with no bound; the orchestrator's SIGKILL then strands those messages until the visibility
        # timeout. Remapped, SIGTERM starts the soft shutdown: running tasks get worker_soft_shutdown_timeout, the
        # rest are handed back to the queue at once. billiard reads this when first imported, after this module.
        os.environ.setdefault("REMAP_SIGTERM", "SIGQUIT")
    app = Celery("agentsearch", broker=settings.broker_url, backend=settings.result_backend,
                 include=[*TASK_MODULES, *settings.worker_imports])
    app.conf.update(
        imports=HOOK_MODULES,
        task_default_queue=DEFAULT_QUEUE,
        task_routes={"agentsearch.response_agent": {"queue": ARTIFACTS_QUEUE},
                     "agentsearch.ingest_documents": {"queue": INGEST_QUEUE},
                     "agentsearch.parse_document": {"queue": INGEST_QUEUE},
                     "agentsearch.run_source": {"queue": INGEST_QUEUE},
                     "agentsearch.run_due_sources": {"queue": INGEST_QUEUE},
                     "agentsearch.deliver_webhook": {"queue": WEBHOOKS_QUEUE},
                     "agentsearch.sweep_webhooks": {"queue": WEBHOOKS_QUEUE}},
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        # At-least-once: a task whose worker dies is handed to another; the steps are idempotent for it
        # (agentsearch.worker.job_tasks: each step's output is kept once per job, so a second run hands on the first
        # one's).
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        # One message per process at a time: a long agent step never holds a second one hostage.
        worker_prefetch_multiplier=1,
        # Not worker_deduplicate_successful_tasks: a chord header task that stored its result but died before the
        # chord counted it would be skipped when redelivered, and the chord would never complete. Run again, it
        # hands on its stored output (the step ledger) and is counted once.
        broker_transport_options=broker_transport_options(settings),
        broker_transport=broker_transport(settings),
        **redis_timeouts(settings.redis_timeout_s, "redis_socket_"),
        # The chord's bookkeeping and each step's result live in the result backend: they must outlive the job.
        result_expires=max(86400, int(settings.job_deadline_s * 4)),
        broker_connection_retry_on_startup=True,
        # A Redis restart takes seconds: publishing waits it out (kombu's default gives up after ~1 s). This is
        # the API's bound (PUBLISH_WITHIN_S, then 503 and the client retries); workers wait longer
        # (agentsearch.worker.lifecycle).
        task_publish_retry_policy=PUBLISH_RETRY,
        result_backend_always_retry=True,
        result_backend_max_retries=RESULT_RETRIES,
        result_backend_max_sleep_between_retries_ms=RESULT_RETRY_SLEEP_MAX_MS,
        # Kept off, as Celery 5 has it (6 turns it on): a running step outlives the broker connection it came on.
        # Cancelled, its agent would be called again from the start; running on, it hands its output on, its
        # acknowledgement reaches Redis after the reconnect, and a copy Redis handed out again meanwhile finds the
        # output in the step ledger.
        worker_cancel_long_running_tasks_on_connection_loss=False,
        # A process that grew past this (a leaky agent, a huge document set) is replaced after its task.
        worker_max_memory_per_child=(settings.worker_max_memory_per_child_mb * 1024) or None,
        # Soft shutdown (Celery 5.5+): on SIGTERM running tasks get this long, then go back to the queue; also
        # when idle, so messages held for a later retry (ETA) are handed back too.
        worker_soft_shutdown_timeout=settings.worker_soft_shutdown_timeout_s,
        worker_enable_soft_shutdown_on_idle=settings.worker_soft_shutdown_timeout_s > 0,
        # Task events are for Flower, which reads them from the broker: the embedded mode's broker lives inside
        # this process, where nothing receives them, so they would only be built and dropped.
        worker_send_task_events=not settings.embedded,
        task_send_sent_event=not settings.embedded,
        task_track_started=True,
        worker_hijack_root_logger=False,
        # The reaper is not on this schedule: beat runs it in its own process (agentsearch.worker.lifecycle).
        beat_schedule={
            "run-due-profile-sets": {"task": "agentsearch.run_due_profile_sets",
                                     "schedule": settings.profile_schedule_interval_s},
            "sweep-webhooks": {"task": "agentsearch.sweep_webhooks", "schedule": settings.webhook_sweep_interval_s},
            "prune-retained": {"task": "agentsearch.prune_retained", "schedule": settings.retention_interval_s},
            "run-due-sources": {"task": "agentsearch.run_due_sources", "schedule": settings.sources_tick_interval_s},
        },
    )
    return app


app = create_app()
# A signature that arrives by name (a chord's body, a deserialised canvas) resolves to the current app; every thread
# (API request handlers included) must find this one.
app.set_default()


@before_task_publish.connect
def _start_the_publish_clock(**_kwargs) -> None:
    # Per message and per thread (or task): the bound of PUBLISH_RETRY counts from here.
    _publish_started.set(time.monotonic())


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


def wait_until_ready(timeout_s: float = 30.0) -> None:
    """Block until a worker answers a ping (used by tools that start a worker and then submit)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if app.control.ping(timeout=1.0):
            return
    raise TimeoutError(f"no Celery worker answered within {timeout_s:.0f} s")
