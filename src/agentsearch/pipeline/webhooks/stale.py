"""``job.stale``: the webhooks of the answers whose cited documents changed or were deleted.

A stale mark is written where the document changes (``agentsearch.pipeline.ingestion.cited``, in the ingestion's
or the deletion's own transaction), so ``GET /v1/jobs/{id}`` and the whole-job cache see it at once. Its webhooks
are written here, by the periodic sweep (``agentsearch.worker.webhooks.sweep_webhooks``, every
``webhook_sweep_interval_s``, 10 s by default): a document cited by thousands of answers fans out to as many
deliveries, each checked against its subscriber's access, which is no work for an ingestion's transaction (and the
ingestion sits below the webhooks). The marks not yet announced are found by a partial index; each job is announced
once (a second document of it changing later adds its mark, not a second event), and so is every job answered
from the cache of it.

Usage::

    announce_stale(db)       # -> how many jobs' job.stale deliveries were written; the sweep then sends them
"""

from __future__ import annotations

from sqlalchemy import select, update

from agentsearch.pipeline.ingestion.cited import stale_marks
from agentsearch.pipeline.platform.db import Database, utcnow
from agentsearch.pipeline.platform.tables.answers import JobCitationRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.webhooks.events import JOB_STALE
from agentsearch.pipeline.webhooks.outbox import record_job_event

# Jobs announced per sweep: a larger backlog is the next sweep's.
ANNOUNCE_BATCH = 200


def announce_stale(db: Database, limit: int = ANNOUNCE_BATCH) -> int:
    """Write the ``job.stale`` deliveries of up to ``limit`` jobs with stale marks not yet announced (and of the
    jobs answered from their cache), and mark those announced, in one transaction; how many jobs."""
    with db.session() as s:
        pending = list(s.scalars(
            select(JobCitationRow.job_id)
            .where(JobCitationRow.stale.is_not(None), JobCitationRow.announced_at.is_(None))
            .order_by(JobCitationRow.stale_at)
            .limit(limit * 4)).all())
        jobs = list(dict.fromkeys(pending))[:limit]
        if not jobs:
            return 0
        # A job announced before (another of its documents changed earlier) is not announced again.
        told = set(s.scalars(select(JobCitationRow.job_id).where(JobCitationRow.job_id.in_(jobs),
                                                                 JobCitationRow.announced_at.is_not(None))).all())
        fresh = [j for j in jobs if j not in told]
        copies = s.execute(select(JobRow.id, JobRow.cached_from).where(JobRow.cached_from.in_(fresh))).all()
        marks = stale_marks(s, [*fresh, *(c for c, _ in copies)])
        for job in s.scalars(select(JobRow).where(JobRow.id.in_([*fresh, *(c for c, _ in copies)]))).all():
            if job.status == "succeeded" and (own := marks.get(job.id)):
                record_job_event(s, job, JOB_STALE, stale=own)
        s.execute(update(JobCitationRow)
                  .where(JobCitationRow.job_id.in_(jobs), JobCitationRow.stale.is_not(None),
                         JobCitationRow.announced_at.is_(None))
                  .values(announced_at=utcnow())
                  .execution_options(synchronize_session=False))
        return len(jobs)

