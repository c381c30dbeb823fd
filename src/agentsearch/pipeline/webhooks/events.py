"""The events a webhook can subscribe to, and the body each delivery carries.

The body says which job ended, how, and where to read its result; never the result itself, nor an artifact's
bytes: a receiver fetches ``links.job`` with its API key.

Usage::

    event_for("succeeded")                          # "job.succeeded"
    event_payload(job, "job.succeeded", utcnow())   # {"type": ..., "timestamp": ..., "data": {...}}
    event_payload(job, "job.stale", utcnow(), stale={"handbook": "changed"})
    encode(payload)                                 # the exact text that is signed and sent
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.records.job_response import JobResponse

JOB_SUCCEEDED, JOB_FAILED, JOB_CANCELLED = "job.succeeded", "job.failed", "job.cancelled"
# Not an end: a succeeded job's answer cites a document that changed or was deleted since
# (``agentsearch.pipeline.webhooks.stale``).
JOB_STALE = "job.stale"
EVENT_TYPES: tuple[str, ...] = (JOB_SUCCEEDED, JOB_FAILED, JOB_CANCELLED, JOB_STALE)
_BY_STATUS = {"succeeded": JOB_SUCCEEDED, "failed": JOB_FAILED, "cancelled": JOB_CANCELLED}


def event_for(status: str) -> str | None:
    """The event a job status ends with; None for a status that is not an end (queued, running)."""
    return _BY_STATUS.get(status)


def event_payload(job: JobRow, event: str, at: datetime, stale: dict[str, str] | None = None) -> dict[str, Any]:
    """The body of the delivery of ``event`` for ``job``, stamped ``at``; a ``job.stale`` one names the cited
    documents that changed or were deleted (``stale``: ``{document_id: "changed" | "deleted"}``), never their
    content."""
    job_link = f"/v1/jobs/{job.id}"
    links: dict[str, Any] = {"job": job_link, "events": f"{job_link}/events"}
    if job.status == "succeeded":
        # By reference, as the API's own links: a job answered from the cache shows its source's artifacts.
        links["artifacts"] = [f"{job_link}/artifacts/{filename}"
                              for filename in JobResponse.load(job.response or {}).artifact_filenames()]
    data: dict[str, Any] = {"job_id": str(job.id), "status": job.status, "collection_id": str(job.collection_id)}
    if job.error:
        data["error"] = job.error
    if stale is not None:
        data["stale"] = dict(stale)
    data["links"] = links
    return {"type": event, "timestamp": at.isoformat(), "data": data}


def encode(payload: dict[str, Any]) -> str:
    """The payload as sent: compact JSON, keys in a fixed order, so every attempt signs the same text."""
    return json.dumps(payload, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
