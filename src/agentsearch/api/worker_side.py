"""The API's one door to the worker side: the tasks it puts on the queue and, in the embedded mode, the workers and
schedules it runs itself.

Every import of ``worker`` in ``src/agentsearch/api/`` is here (``tests/unit/api/test_worker_door.py`` fails for any
other), so what the API needs of the queue's side is one list: a route sends a job's canvas or a webhook delivery, the
app holds the Celery app, and the embedded mode starts the worker threads and the ticks Celery beat gives a deployment.
Anything else a route hands on to the workers goes by task name (``celery.send_task``), which needs no import.

Usage::

    from agentsearch.api.worker_side import enqueue_job, deliver_webhook
    task_ids = enqueue_job(job_id, specs, state, default_timeout_s)      # a new job's canvas on the queues
    deliver_webhook.apply_async((delivery_id,), {"manual": True})
"""

from __future__ import annotations

from agentsearch.worker.agentic_tasks import run_due_profile_sets
from agentsearch.worker.app import app as celery_app
from agentsearch.worker.embedded import EmbeddedWorker
from agentsearch.worker.job_tasks import enqueue_job
from agentsearch.worker.retention import prune_retained
from agentsearch.worker.sources import run_due_sources
from agentsearch.worker.webhooks import deliver_webhook, sweep_webhooks

__all__ = [
    "EmbeddedWorker",
    "celery_app",
    "deliver_webhook",
    "enqueue_job",
    "prune_retained",
    "run_due_profile_sets",
    "run_due_sources",
    "sweep_webhooks",
]
