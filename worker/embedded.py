"""An in-process Celery worker on threads, for the embedded mode (``memory://`` broker).

Usage::

    worker = EmbeddedWorker(app, concurrency=4)
    worker.start()          # returns once the consumer is ready
    ...
    worker.stop()
"""

from __future__ import annotations

import threading

from celery import Celery
from celery.worker import WorkController

from worker.app import ALL_QUEUES


class _ReadyWorkController(WorkController):
    def __init__(self, *args, **kwargs) -> None:
        self.ready = threading.Event()
        super().__init__(*args, **kwargs)

    def on_consumer_ready(self, consumer) -> None:
        self.ready.set()


class EmbeddedWorker:
    def __init__(self, app: Celery, concurrency: int = 4) -> None:
        self.app = app
        self.concurrency = concurrency
        self._controller: _ReadyWorkController | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout_s: float = 30.0) -> None:
        self.app.set_current()
        # Threads, not processes: the memory broker lives in this process.
        self._controller = _ReadyWorkController(
            app=self.app,
            pool="threads",
            concurrency=self.concurrency,
            queues=list(ALL_QUEUES),
            loglevel="WARNING",
            hostname="embedded@agentsearch",
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            ready_callback=None,
        )
        self._thread = threading.Thread(target=self._controller.start, name="agentsearch-worker", daemon=True)
        self._thread.start()
        if not self._controller.ready.wait(timeout_s):
            raise TimeoutError("embedded worker did not start")

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._controller is not None:
            self._controller.stop(in_sighandler=False)
        if self._thread is not None:
            self._thread.join(timeout_s)
