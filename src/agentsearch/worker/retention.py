"""Retention as a periodic task: what is past its kind's retention is pruned
(``agentsearch.pipeline.operations.retention``).

Beat sends ``prune_retained`` every ``retention_interval_s`` (``agentsearch.worker.app``); in embedded mode a ``Ticker``
of the API process does. A run stops after half the interval, so runs do not pile up behind a long backlog: the next one
goes on where it stopped. What it pruned is added to ``agentsearch_retention_pruned_total{kind}`` (``/metrics``).

Usage::

    prune_retained()                              # {"dry_run": False, "counts": {"jobs": 12, ...}, "total": ...}
    app.send_task(prune_retained.name, kwargs={"dry_run": True})     # counted by a worker, nothing deleted
"""

from __future__ import annotations

import logging
from typing import Any

from agentsearch.pipeline.operations.retention import RetentionPolicy, prune
from agentsearch.pipeline.services import get_services
from agentsearch.worker.app import DB_RETRY, app

log = logging.getLogger("agentsearch.retention")


@app.task(name="agentsearch.prune_retained", **DB_RETRY)
def prune_retained(dry_run: bool = False) -> dict[str, Any]:
    """Periodic: prune every kind past its retention in small batches (or, ``dry_run``, count what would go).

    A batch commits on its own, so a run retried after the database went away starts from what is left.
    """
    services = get_services()
    settings = services.settings
    report = prune(services.db, RetentionPolicy.of(settings), dry_run=dry_run,
                   budget_s=settings.retention_interval_s / 2)
    if not dry_run:
        services.metrics.record_retention(report.counts)
    if report.total:
        log.info("retention: %s %d rows in %.1f s %s", "would prune" if dry_run else "pruned", report.total,
                 report.seconds, {k: n for k, n in report.counts.items() if n})
    return report.as_dict()
