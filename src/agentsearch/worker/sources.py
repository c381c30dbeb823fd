"""Sources' runs on the ingest queue: a run's body is the pipeline's (``agentsearch.pipeline.sources.run``); this
sends the parsing, indexing and deletion tasks it names, as the upload route does. ``run_due_sources`` (Celery beat,
or the embedded mode's tick) queues a run for every source whose schedule has come.

Usage::

    run_source.apply_async((str(run_id),), queue=INGEST_QUEUE)   # {"status": "succeeded", "documents": {...}}
    run_due_sources()                                            # [run ids queued]
"""

from __future__ import annotations

import uuid
from typing import Any

from agentsearch.pipeline.services import get_services
from agentsearch.pipeline.sources.ingest import Task
from agentsearch.pipeline.sources.run import run_source as run_a_source
from agentsearch.pipeline.sources.store import claim_due
from agentsearch.worker.app import INGEST_QUEUE, app


def _send(tasks: list[Task]) -> None:
    for name, args, task_id in tasks:
        app.send_task(name, args=args, task_id=task_id, queue=INGEST_QUEUE)


@app.task(name="agentsearch.run_source")
def run_source(run_id: str) -> dict[str, Any]:
    """One run of a source (its lease keeps a second from overlapping it)."""
    services = get_services()
    return run_a_source(services.db, services.settings, uuid.UUID(run_id), _send)


@app.task(name="agentsearch.run_due_sources")
def run_due_sources() -> list[str]:
    """Periodic: a run queued for each enabled source whose schedule has come."""
    due = claim_due(get_services().db)
    for _, run_id in due:
        run_source.apply_async((str(run_id),), queue=INGEST_QUEUE)
    return [str(run_id) for _, run_id in due]
