"""The Celery app, configured from ``pipeline.settings``.

Start a worker with ``agentsearch worker`` (or ``celery -A worker.app worker``). Response agents run on their own
``artifacts`` queue so heavy rendering never starves search.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from celery import Celery
from celery.signals import worker_process_init, worker_ready, worker_shutdown

from pipeline.services import reset_services
from pipeline.settings import get_settings

DEFAULT_QUEUE = "celery"
ARTIFACTS_QUEUE = "artifacts"
HEARTBEAT_FILE = Path("/tmp/agentsearch-worker-heartbeat")


def create_app() -> Celery:
    settings = get_settings()
    app = Celery("agentsearch", broker=settings.broker_url, backend=settings.result_backend, include=["worker.tasks"])
    app.conf.update(
        task_default_queue=DEFAULT_QUEUE,
        task_routes={"agentsearch.response_agent": {"queue": ARTIFACTS_QUEUE}},
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        # At-least-once: a task whose worker dies is handed to another; the steps are idempotent for it.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        # Redis redelivers an unacked task after this; it must exceed the longest job.
        broker_transport_options={"visibility_timeout": max(3600, int(settings.job_deadline_s * 2))},
        result_expires=max(86400, int(settings.job_deadline_s * 4)),
        broker_connection_retry_on_startup=True,
        worker_send_task_events=True,
        task_send_sent_event=True,
        task_track_started=True,
        worker_hijack_root_logger=False,
        beat_schedule={
            "reap-overdue-jobs": {"task": "agentsearch.reap_jobs", "schedule": settings.reaper_interval_s},
        },
    )
    return app


app = create_app()
# Canvas signatures are built by task name; every thread (API request handlers included) must resolve them here.
app.set_default()


@worker_process_init.connect
def _fresh_clients_after_fork(**_kwargs) -> None:
    # Database pools, Redis sockets and gRPC channels must not be shared with the parent process.
    services = reset_services()
    if services.settings.worker_preload_embedder:
        # Load the model while the process waits for work, so the first search does not pay for it.
        # In a thread: Celery gives a child only a few seconds to report ready.
        threading.Thread(target=lambda: services.embedder, name="agentsearch-preload", daemon=True).start()


_heartbeat_stop = threading.Event()


@worker_ready.connect
def _start_heartbeat(**_kwargs) -> None:
    """Touch a file every 10 s: a cheap liveness probe that does not ask the broker anything."""

    def beat() -> None:
        while not _heartbeat_stop.is_set():
            try:
                HEARTBEAT_FILE.touch()
            except OSError:
                pass
            _heartbeat_stop.wait(10)

    if not get_settings().embedded:
        threading.Thread(target=beat, name="agentsearch-heartbeat", daemon=True).start()


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
