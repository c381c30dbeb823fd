"""In-process Celery workers on threads, for the embedded mode (``memory://`` broker).

Two pools, as a deployment runs two workers: one for the job's steps, rendering and ingestion, and one of its own
for webhook deliveries (the ``webhooks`` queue). A delivery waits on someone else's server, up to the attempt's
timeout; sharing the steps' few threads, a user's slow receivers would hold up every user's jobs.

Usage::

    worker = EmbeddedWorker(app, concurrency=4)
    worker.start()          # returns once both consumers are ready
    ...
    worker.stop()
"""

from __future__ import annotations

import threading

from celery import Celery
from celery.worker import WorkController

from agentsearch.worker.app import ALL_QUEUES, WEBHOOKS_QUEUE

JOB_QUEUES = [q for q in ALL_QUEUES if q != WEBHOOKS_QUEUE]
WEBHOOK_THREADS = 4


class _ReadyWorkController(WorkController):
    def __init__(self, *args, **kwargs) -> None:
        self.ready = threading.Event()
        super().__init__(*args, **kwargs)

    def on_consumer_ready(self, consumer) -> None:
        self.ready.set()


class EmbeddedWorker:
    def __init__(self, app: Celery, concurrency: int = 4, webhook_concurrency: int = WEBHOOK_THREADS) -> None:
        self.app = app
        self.concurrency, self.webhook_concurrency = concurrency, webhook_concurrency
        self._controllers: list[_ReadyWorkController] = []
        self._threads: list[threading.Thread] = []

    def start(self, timeout_s: float = 30.0) -> None:
        self.app.set_current()
        for name, queues, concurrency in (("embedded", JOB_QUEUES, self.concurrency),
                                          ("embedded-webhooks", [WEBHOOKS_QUEUE], self.webhook_concurrency)):
            # Threads, not processes: the memory broker lives in this process.
            controller = _ReadyWorkController(
                app=self.app,
                pool="threads",
                concurrency=concurrency,
                queues=queues,
                loglevel="WARNING",
                hostname=f"{name}@agentsearch",
                without_heartbeat=True,
                without_mingle=True,
                without_gossip=True,
                ready_callback=None,
            )
            thread = threading.Thread(target=controller.start, name=f"agentsearch-{name}-worker", daemon=True)
            self._controllers.append(controller)
            self._threads.append(thread)
            thread.start()
            if not controller.ready.wait(timeout_s):
                raise TimeoutError(f"embedded worker {name} did not start")

    def stop(self, timeout_s: float = 10.0) -> None:
        for controller in self._controllers:
            controller.stop(in_sighandler=False)
        for thread in self._threads:
            thread.join(timeout_s)
