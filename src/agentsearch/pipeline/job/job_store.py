"""Job rows: the truth about a job. Every write of the ``jobs`` table is here: a submit creates the row, workers
record progress, the reaper and cancel end it; the API reads it.

Most methods are a transaction of their own. Those that take a session ``s`` work in the caller's: a submit reads
the collections, looks for an earlier job and inserts its own in one transaction (one commit is what a cache hit
costs).

Every end of a job (succeed, fail, cancel, reap, and a row born succeeded from the cache) writes the job's webhook
deliveries in the transaction that ends it (``agentsearch.pipeline.webhooks.outbox``): a crash loses both or neither. A
success writes the job's conversation turn there too (``agentsearch.pipeline.job.conversation.record_turn``).

Usage::

    jobs = JobStore(db)
    with db.session() as s:
        earlier = jobs.by_idempotency_key(s, user_id, key) or jobs.find_cached(s, user_id, cache_key)
        job = jobs.create(s, job_id, user_id, collection_id, query, request={...}, deadline_s=600, state=state)
    jobs.progress(job_id, "core_search", state)
    jobs.succeed(job_id, response, runs)
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, overload

from sqlalchemy import delete, or_, select, text, true, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, defer

from agentsearch.pipeline.ingestion.cited import Cited, has_stale_citation, record_citations
from agentsearch.pipeline.job import progress_pg, progress_sqlite
from agentsearch.pipeline.job.conversation import record_turn
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.platform.db import Database, utcnow
from agentsearch.pipeline.platform.tables.jobs import ArtifactRow, JobRow
from agentsearch.pipeline.records.agent_runs import AgentRun
from agentsearch.pipeline.records.job_response import JobResponse
from agentsearch.pipeline.webhooks.outbox import record_job_end

TERMINAL = frozenset({"succeeded", "failed", "cancelled"})
log = logging.getLogger("agentsearch.jobs")
# A node's heartbeat may be this late before its running jobs count as orphaned (heartbeats come every 10 s).
ORPHAN_GRACE_S = 45.0

_node: str | None = None


def set_worker_node(name: str | None) -> None:
    """Name this process's Celery node; progress reports record it, so the reaper knows whose heartbeat to check."""
    global _node
    _node = name


class MissingState(LookupError):
    """A job's saved (or initial) state that is not there: the job's row is gone (deleted with its collection or
    its user, or pruned) or the job never saved one. A task meeting it has nothing to go on: it ends, ``reason``
    logged (``agentsearch.worker.missing_state``)."""

    def __init__(self, job_id: str, status: str | None, what: str = "saved state") -> None:
        self.job_id, self.status = job_id, status
        self.reason = (f"it has no {what}: the job is gone (deleted with its collection or user, or pruned)"
                       if status is None else f"it has no {what}: the job is {status} and never saved one")
        super().__init__(f"job {job_id}: {self.reason}")


@dataclass(frozen=True)
class ReapResult:
    failed: list[str]
    retried: list[str]


@dataclass(frozen=True)
class JobTimeline:
    """What the job's trace span needs once the job has ended."""

    status: str
    created_at: datetime
    finished_at: datetime | None
    error: str | None
    traceparent: str | None


@dataclass(frozen=True)
class JobProgress:
    """What a job's event stream passes on: its status, the stages and agents so far, its error."""

    status: str
    stage_log: list[dict[str, Any]]
    agent_runs: list[dict[str, Any]]
    error: str | None


@dataclass(frozen=True)
class StoredAnswer:
    """A job's answer as its response keeps it (``text`` None before the job has one)."""

    text: str | None
    method: str | None
    fallback_reason: str | None


class JobStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def _job(self, s, job_id: str) -> JobRow | None:
        return s.scalar(select(JobRow).where(JobRow.id == uuid.UUID(job_id)))

    def create(self, s: Session, job_id: uuid.UUID, user_id: uuid.UUID, collection_id: uuid.UUID, query: str, *,
               request: dict[str, Any], deadline_s: float, snapshot: list[dict[str, Any]] | None = None,
               state: JobState | None = None, idempotency_key: str | None = None, cache_key: str | None = None,
               answered_from: JobRow | None = None, access_groups: list[str] | None = None) -> JobRow:
        """Insert a queued job in the caller's transaction, flushed: a second job with the same Idempotency-Key
        raises ``IntegrityError`` here. ``state`` is what it is enqueued with (kept so the reaper can enqueue it
        again).

        With ``answered_from`` the row is born succeeded, pointing at that job's stored response: no worker and no
        agent ever see it.
        """
        # The id is the caller's, not the database's, so a state or a cached response can name the job in the same
        # INSERT.
        job = JobRow(id=job_id, user_id=user_id, collection_id=collection_id, query=query, status="queued",
                  request=request, config_snapshot=list(snapshot or []),
                  deadline_at=utcnow() + timedelta(seconds=deadline_s), idempotency_key=idempotency_key,
                  cache_key=cache_key, initial_state=state.dump() if state is not None else None,
                  access_groups=access_groups)
        if answered_from is not None:
            now = utcnow()
            job.status, job.stage, job.cached_from = "succeeded", "done", answered_from.id
            job.stage_log = [{"stage": "done", "at": now.isoformat(), "cached": True}]
            job.response = {**(answered_from.response or {}), "job_id": str(job.id), "cached": True,
                            "cached_from": str(answered_from.id)}
            job.agent_runs, job.timings_ms = answered_from.agent_runs, {}
            job.started_at = job.finished_at = now
            if s.get_bind().dialect.name == "postgresql":
                # This row only points at a stored response, so it need not wait for its WAL flush: -16% p50 in
                # bench/cache_hit.py. A server crash in the next few hundred ms may lose the pointer, never a job's
                # work.
                s.execute(text("SET LOCAL synchronous_commit TO OFF"))
        s.add(job)
        s.flush()
        if answered_from is not None:
            record_job_end(s, job)  # born ended: its webhooks hear of it as of any other job's end
            record_turn(s, job)  # and its conversation gets its turn, as from any other success
        return job

    def by_idempotency_key(self, s: Session, user_id: uuid.UUID, key: str) -> JobRow | None:
        """The user's job submitted with this Idempotency-Key, in the caller's transaction."""
        return s.scalar(select(JobRow).where(JobRow.user_id == user_id, JobRow.idempotency_key == key))

    def find_cached(self, s: Session, user_id: uuid.UUID, cache_key: str,
                    shared_with: Callable[[JobRow], bool] | None = None) -> JobRow | None:
        """The newest job that answered the same request completely, in the caller's transaction: the user's own,
        or, with ``shared_with``, another user's that it accepts (a team member's job over the team's collections,
        which the key's collections, epochs and document groups make the same search). A job that was itself
        answered from cache is never the source (its response is a copy)."""
        mine = JobRow.user_id == user_id
        candidates = s.scalars(
            select(JobRow)
            # Not the large JSON the answer does not need (the saved state holds every source's text): a hit reads
            # the response and the records. A column left out is read if asked for (another user's job's request).
            .options(defer(JobRow.state), defer(JobRow.initial_state), defer(JobRow.config_snapshot),
                     defer(JobRow.stage_log))
            .where(mine if shared_with is None else true(), JobRow.cache_key == cache_key, JobRow.status == "succeeded",
                   JobRow.cached_from.is_(None),
                   # An answer citing a document changed or deleted since is never served again.
                   ~has_stale_citation(JobRow.id))
            .order_by(JobRow.finished_at.desc())
            .limit(5)
        ).all()
        # Only a complete answer is reused: one with a failed agent or search error deserves a new try.
        return next((c for c in candidates if c.response and c.response.get("complete")
                     and (c.user_id == user_id or (shared_with is not None and shared_with(c)))), None)

    def discard(self, job_id: str) -> None:
        """Take back a job that never reached the queues (the broker refused it): no row is left to wait forever."""
        with self.db.session() as s:
            job = self._job(s, job_id)
            if job is not None:
                s.delete(job)

    def progress(self, job_id: str, stage: str, state: JobState | None = None, keep_state: bool = False) -> bool:
        """Record the stage (and state); False when the job has already ended (cancelled, reaped), so the caller
        can skip its work: one round trip serves as both progress report and cancellation check.

        It is one ``UPDATE ... RETURNING`` (``progress_pg``, ``progress_sqlite``). On PostgreSQL a progress report
        need not wait for the disk (``Database.progress_engine``): the state travels with the task, and the job's
        end (and the state kept for assemble, ``keep_state``) is committed durably. A server crash may lose the last
        reports, never corrupt them; waiting for the WAL flush cost every step two disk syncs.
        """
        if self.db.engine.dialect.name == "postgresql":
            return progress_pg.report(self.db, job_id, stage, state, keep_state, _node)
        return progress_sqlite.report(self.db, job_id, stage, state, keep_state, _node)

    def record_runs(self, job_id: str, runs: list[AgentRun]) -> bool:
        """Add one step's records (an agent's run and its stand-in's) to a running job's, as that step ends: the
        response agents' records reach the job's events one by one, not all at assembly. Nothing is added twice
        (a redelivered step) nor to a job that has ended; False then."""
        if not runs:
            return False
        first = runs[0]
        probe = {"agent_id": first.agent_id, "config_id": first.config_id, "stage": first.stage.value}
        if self.db.engine.dialect.name == "postgresql":
            return progress_pg.append_runs(self.db, job_id, runs, probe)
        return progress_sqlite.append_runs(self.db, job_id, runs, probe)

    def load_state(self, job_id: str) -> JobState:
        """The state the job saved (a step's ``keep_state``); ``MissingState`` when there is none to load."""
        with self.db.session() as s:
            job = self._job(s, job_id)
            if job is None or job.state is None:
                raise MissingState(job_id, job.status if job is not None else None)
            return JobState.load(job.state)

    def succeed(self, job_id: str, response: dict[str, Any], runs: list[AgentRun], timings: dict[str, float],
                cited: list[Cited] | None = None) -> bool:
        """Record the job's response and the documents it cites (``cited``, at the versions read); False (nothing
        written) when the job had already ended: a second run of the last step must not log a second "done" nor
        replace the response a client may already have read."""
        with self.db.session() as s:
            job = self._job(s, job_id)
            if job is None or job.status in TERMINAL:
                return False
            job.status, job.stage = "succeeded", "done"
            job.stage_log = [*(job.stage_log or []), {"stage": "done", "at": utcnow().isoformat()}]
            job.response = response
            job.agent_runs = in_arrival_order(job.agent_runs, runs)
            job.timings_ms = timings
            job.finished_at = job.finished_at or utcnow()
            record_citations(s, job.id, cited or [])
            record_job_end(s, job)
            record_turn(s, job)  # the question and answer become the conversation's next turn, in this transaction
            return True

    def fail(self, job_id: str, error: str) -> None:
        with self.db.session() as s:
            job = self._job(s, job_id)
            if job is None or job.status in TERMINAL:
                return
            job.status, job.error, job.finished_at = "failed", error[:4000], utcnow()
            record_job_end(s, job)

    def timeline(self, job_id: str) -> JobTimeline | None:
        with self.db.session() as s:
            job = self._job(s, job_id)
            if job is None:
                return None
            return JobTimeline(job.status, job.created_at, job.finished_at, job.error,
                               (job.state or {}).get("traceparent"))

    def status(self, job_id: str) -> str | None:
        with self.db.session() as s:
            return s.scalar(select(JobRow.status).where(JobRow.id == uuid.UUID(job_id)))

    def get(self, job_id: str) -> JobRow | None:
        """The job's row, read in a transaction of its own (its columns stay readable after it)."""
        with self.db.session() as s:
            return self._job(s, job_id)

    def progress_of(self, job_id: str) -> JobProgress | None:
        """The job's status, stage log, agent runs and error, in one read."""
        with self.db.session() as s:
            job = self._job(s, job_id)
            if job is None:
                return None
            return JobProgress(job.status, list(job.stage_log or []), list(job.agent_runs or []), job.error)

    def stored_answer(self, job_id: str) -> StoredAnswer:
        """The answer the job's response holds, with how it was written."""
        with self.db.session() as s:
            job = self._job(s, job_id)
            stored = (job.response if job is not None else None) or {}
        response = JobResponse.load(stored)
        meta = response.metadata.get("answer") or {}
        return StoredAnswer(response.answer, meta.get("method"), meta.get("fallback_reason"))

    def for_assembly(self, job_id: str) -> tuple[str | None, JobState | None, list[dict[str, Any]]]:
        """What the last step needs, in one round trip: the job's status, its saved state and its agents."""
        with self.db.session() as s:
            row = s.execute(select(JobRow.status, JobRow.state, JobRow.config_snapshot)
                            .where(JobRow.id == uuid.UUID(job_id))).one_or_none()
        if row is None:
            return None, None, []
        status, state, snapshot = row
        return status, JobState.load(state) if state is not None else None, list(snapshot or [])

    def is_cancelled(self, job_id: str) -> bool:
        with self.db.session() as s:
            job = self._job(s, job_id)
            return job is not None and job.status == "cancelled"

    def cancel(self, job_id: str) -> bool:
        """Mark a job cancelled; its remaining steps see it at their next boundary and do no work.

        The artifacts its response agents stored already go with it: a cancelled job has no response to list them,
        and from now on the artifact store refuses its agents (``ArtifactStore.save`` reads this row, locked, in
        the insert's transaction; the row is locked here too, so an insert under way commits first and is removed).
        """
        with self.db.session() as s:
            job = s.scalar(select(JobRow).where(JobRow.id == uuid.UUID(job_id)).with_for_update())
            if job is None or job.status in TERMINAL:
                return False
            job.status, job.error, job.finished_at = "cancelled", "cancelled by the user", utcnow()
            record_job_end(s, job)
            s.execute(delete(ArtifactRow).where(ArtifactRow.job_id == job.id))
            return True

    def reap(self, now: datetime | None = None, alive_nodes: set[str] | None = None,
             deadline_s: float = 600.0, max_attempts: int = 2,
             task_nodes: Callable[[list[str]], set[str]] | None = None) -> ReapResult:
        """No job stays queued or running forever.

        A job whose node stopped heartbeating (``alive_nodes`` given, its node not in it) lost its worker, not its
        chance: it is put back to ``queued`` with a fresh deadline, once (``max_attempts``), and the caller enqueues
        it again from its initial state. A job's node is the one that last reported progress; ``task_nodes`` maps
        the job's task ids to the nodes they were last seen running on, which catches a step that died before its
        first report and response agents (they run beside the node that made the answer and report nothing). A job
        past its deadline has used its whole time budget and is failed with the stage it was stuck in; so is an
        orphan that was already retried.
        """
        now = now or utcnow()
        grace = timedelta(seconds=ORPHAN_GRACE_S)
        # Looked at without locks first: under load many queued jobs are old, and their rows must stay free for the
        # workers' progress reports while Redis is asked about their tasks. Only the jobs acted on are locked.
        with self.db.session() as s:
            rows = s.execute(
                select(JobRow.id, JobRow.status, JobRow.worker, JobRow.deadline_at, JobRow.task_ids)
                .where(JobRow.status.in_(("queued", "running")),
                       or_(JobRow.deadline_at < now, JobRow.updated_at < now - grace))
            ).all()
        overdue, orphans = set(), {}
        for job_id, status, worker, deadline_at, task_ids in rows:
            if deadline_at is not None and _aware(deadline_at) < now:
                overdue.add(job_id)
                continue
            if alive_nodes is None:
                continue
            lost = {worker} if status == "running" and worker is not None and worker not in alive_nodes else set()
            if task_nodes is not None and task_ids:
                lost |= {node for node in task_nodes(list(task_ids)) if node not in alive_nodes}
            if lost:
                orphans[job_id] = ", ".join(sorted(lost))
        failed: list[str] = []
        retried: list[str] = []
        if not overdue and not orphans:
            return ReapResult(failed, retried)
        with self.db.session() as s:
            jobs = s.scalars(
                select(JobRow).where(JobRow.id.in_([*overdue, *orphans]), JobRow.status.in_(("queued", "running")))
                .with_for_update(skip_locked=True)
            ).all()
            for job in jobs:
                where = f"in stage {job.stage}" if job.stage else "waiting in the queue"
                updated = _aware(job.updated_at)
                if job.deadline_at is not None and _aware(job.deadline_at) < now:
                    job.status, job.finished_at = "failed", now
                    job.error = f"deadline passed {where}; no worker finished it (reaped)"
                    record_job_end(s, job)
                    failed.append(str(job.id))
                elif job.id not in orphans or (updated is not None and updated >= now - grace):
                    continue  # it moved on since it was looked at: some worker has it
                elif job.attempts < max_attempts and job.initial_state is not None:
                    job.status, job.stage, job.worker = "queued", None, None
                    job.attempts += 1
                    job.deadline_at = now + timedelta(seconds=deadline_s)
                    job.stage_log = [*(job.stage_log or []), {"stage": "retry", "at": now.isoformat(),
                                                              "reason": f"worker lost {where} ({orphans[job.id]})"}]
                    retried.append(str(job.id))
                else:
                    job.status, job.finished_at = "failed", now
                    job.error = f"worker {orphans[job.id]} stopped {where} on attempt {job.attempts} (reaped)"
                    record_job_end(s, job)
                    failed.append(str(job.id))
        return ReapResult(failed, retried)

    def initial_state(self, job_id: str) -> tuple[JobState, list[dict[str, Any]]]:
        """What a job was enqueued with: its first state and its agents' snapshot."""
        with self.db.session() as s:
            job = self._job(s, job_id)
            if job is None or job.initial_state is None:
                raise MissingState(job_id, job.status if job is not None else None, "initial state")
            return JobState.load(job.initial_state), list(job.config_snapshot or [])

    def record_tasks(self, job_id: str, task_ids: list[str]) -> None:
        """The job's task ids, for a cancel to revoke them. On PostgreSQL one ``UPDATE`` that does not wait for the
        disk (``Database.progress_engine``): each submission waited for two WAL flushes, and a crash that loses these
        ids loses only the revokes, since a cancelled job's next step stops at its own progress check."""
        if self.db.engine.dialect.name == "postgresql":
            statement = update(JobRow).where(JobRow.id == uuid.UUID(job_id)).values(task_ids=task_ids)
            try:
                with self.db.progress_engine.connect() as conn:
                    conn.execute(statement)
            except DBAPIError as exc:
                if not exc.connection_invalidated:
                    raise
                with self.db.progress_engine.connect() as conn:  # no pre-ping there: a broken one is replaced now
                    conn.execute(statement)
            return
        with self.db.session() as s:
            job = self._job(s, job_id)
            if job is not None:
                job.task_ids = task_ids

    def task_ids(self, job_id: str) -> list[str]:
        with self.db.session() as s:
            job = self._job(s, job_id)
            return list(job.task_ids or []) if job is not None else []


def _run_key(record: dict[str, Any]) -> tuple:
    return record.get("agent_id"), record.get("config_id"), record.get("stage"), record.get("stood_in_for")


def in_arrival_order(stored: list[dict[str, Any]] | None, runs: list[AgentRun]) -> list[dict[str, Any]]:
    """The job's final records, those already stored first in their stored order (the response agents' as each
    ended), the rest after: an event stream reading the records by position never sees one move."""
    arrived: dict[Any, int] = {}
    for i, record in enumerate(stored or []):
        arrived.setdefault(_run_key(record), i)
    dumped = [r.model_dump(mode="json") for r in runs]
    return sorted(dumped, key=lambda r: arrived.get(_run_key(r), len(arrived)))


@overload
def _aware(moment: datetime) -> datetime: ...
@overload
def _aware(moment: None) -> None: ...
def _aware(moment: datetime | None) -> datetime | None:
    # SQLite hands back naive datetimes for timezone-aware columns; they were written in UTC.
    if moment is not None and moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment
