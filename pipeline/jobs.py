"""Job rows: the truth about a job. Workers record progress here; the API reads it.

Usage::

    jobs = JobStore(db)
    jobs.progress(job_id, "core_search", state)
    jobs.succeed(job_id, response, runs)
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select

from pipeline.db import Database, Job, utcnow
from pipeline.state import AgentRun, JobState

TERMINAL = frozenset({"succeeded", "failed", "cancelled"})


class JobStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def _job(self, s, job_id: str) -> Job | None:
        return s.scalar(select(Job).where(Job.id == uuid.UUID(job_id)))

    def progress(self, job_id: str, stage: str, state: JobState | None = None, keep_state: bool = False) -> bool:
        """Record the stage (and state); False when the job has already ended (cancelled, reaped), so the caller
        can skip its work: one round trip serves as both progress report and cancellation check."""
        with self.db.session() as s:
            job = self._job(s, job_id)
            if job is None:
                return True  # no row to report to (a step run on its own)
            if job.status in TERMINAL:
                return False
            if job.status == "queued":
                job.status, job.started_at = "running", utcnow()
            if job.stage != stage:
                job.stage_log = [*(job.stage_log or []), {"stage": stage, "at": utcnow().isoformat()}]
            job.stage = stage
            if state is not None:
                job.agent_runs = [r.model_dump(mode="json") for r in state.agent_runs]
                job.timings_ms = dict(state.timings_ms)
                if keep_state:
                    job.state = state.dump()
            return True

    def load_state(self, job_id: str) -> JobState:
        with self.db.session() as s:
            job = self._job(s, job_id)
            if job is None or job.state is None:
                raise LookupError(f"job {job_id} has no saved state")
            return JobState.load(job.state)

    def succeed(self, job_id: str, response: dict[str, Any], runs: list[AgentRun], timings: dict[str, float]) -> None:
        with self.db.session() as s:
            job = self._job(s, job_id)
            if job is None or job.status in ("failed", "cancelled"):
                return
            job.status, job.stage = "succeeded", "done"
            job.stage_log = [*(job.stage_log or []), {"stage": "done", "at": utcnow().isoformat()}]
            job.response = response
            job.agent_runs = [r.model_dump(mode="json") for r in runs]
            job.timings_ms = timings
            job.finished_at = job.finished_at or utcnow()

    def fail(self, job_id: str, error: str) -> None:
        with self.db.session() as s:
            job = self._job(s, job_id)
            if job is None or job.status in TERMINAL:
                return
            job.status, job.error, job.finished_at = "failed", error[:4000], utcnow()

    def is_cancelled(self, job_id: str) -> bool:
        with self.db.session() as s:
            job = self._job(s, job_id)
            return job is not None and job.status == "cancelled"

    def cancel(self, job_id: str) -> bool:
        """Mark a job cancelled; its remaining steps see it at their next boundary and do no work."""
        with self.db.session() as s:
            job = self._job(s, job_id)
            if job is None or job.status in TERMINAL:
                return False
            job.status, job.error, job.finished_at = "cancelled", "cancelled by the user", utcnow()
            return True

    def reap(self, now=None) -> list[str]:
        """Fail every queued or running job past its deadline, with the stage it was stuck in."""
        now = now or utcnow()
        reaped = []
        with self.db.session() as s:
            overdue = s.scalars(
                select(Job).where(Job.status.in_(("queued", "running")), Job.deadline_at < now).with_for_update(
                    skip_locked=True
                )
            ).all()
            for job in overdue:
                where = f"in stage {job.stage}" if job.stage else "waiting in the queue"
                job.status, job.finished_at = "failed", now
                job.error = f"deadline passed {where}; no worker finished it (reaped)"
                reaped.append(str(job.id))
        return reaped
