"""Retention: rows past their kind's retention are pruned in small batches, each committed on its own.

Each ``Kind`` is a table whose rows go once old enough and in a state that lets them go, and the rows that depend
on them (they go in the same transaction, first, so nothing is left pointing at a row that is gone):

- ``jobs``: finished (succeeded, failed, cancelled) for ``retention_jobs_days``, with their ``artifacts`` (the
  bytes are in the row: ``agentsearch.pipeline.job.artifacts``), ``agentic_loops`` and ``profile_runs``. A queued or
  running job never goes, however old; nor does the job a younger cached copy was answered from, whose artifacts the
  copy serves (``Job.cached_from``): it goes with its last copy.
- ``webhook_deliveries``: delivered or given up (``failed``), no attempt out, for
  ``retention_webhook_deliveries_days`` after their event, with their ``webhook_attempts``.
- ``conversation_turns``: for ``retention_conversation_turns_days`` after their job ended. A turn keeps its own
  question and answer, so it outlives its job (its ``job_id`` then answers 404), as webhook deliveries do;
  seen-content records have no job to follow either (``agentsearch.pipeline.agentic.seen`` keeps its own window).
- ``audit_events``: for ``retention_audit_days`` after they were recorded. The table is append-only for the
  service (migration 0017's trigger): each batch sets ``agentsearch.audit_prune`` for its own transaction first
  (``SET LOCAL``), the one DELETE the trigger lets through; nothing else in the service sets it.

Answer streams are Redis keys that expire by themselves (``retention_answer_streams_s``): nothing to prune here.

A batch selects at most ``batch_rows`` of the oldest rows that may go (on PostgreSQL ``FOR UPDATE SKIP LOCKED``: two
pruners running at once take different rows), deletes their dependants and then them, the conditions checked again
in the ``DELETE``, and commits: a lock is held for one batch only. A run stops when nothing is left or its
``budget_s`` is spent; the next run goes on from there. The same code runs on PostgreSQL and SQLite.

Usage::

    policy = RetentionPolicy.of(settings)
    report = prune(db, policy)                      # report.counts == {"jobs": 120, "artifacts": 310, ...}
    report = prune(db, policy, dry_run=True)        # what would go, counted; nothing deleted
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Select, delete, exists, func, select, text
from sqlalchemy.orm import InstrumentedAttribute, Session, aliased

from agentsearch.pipeline.job.job_store import TERMINAL
from agentsearch.pipeline.platform.db import Database, changed_rows, utcnow
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.agentic import AgenticLoopRow, ProfileRunRow
from agentsearch.pipeline.platform.tables.audit import AuditEventRow
from agentsearch.pipeline.platform.tables.conversations import ConversationTurnRow
from agentsearch.pipeline.platform.tables.jobs import ArtifactRow, JobRow
from agentsearch.pipeline.platform.tables.webhooks import WebhookAttemptRow, WebhookDeliveryRow

# Webhook deliveries settled for good: sent, or given up after the retry window. A pending one is still due.
SETTLED_DELIVERIES = ("delivered", "failed")
DAY = timedelta(days=1)


@dataclass(frozen=True)
class RetentionPolicy:
    """Days each kind is kept (0: for ever), and the rows one batch deletes."""

    jobs_days: float = 30.0
    webhook_deliveries_days: float = 30.0
    conversation_turns_days: float = 90.0
    audit_days: float = 365.0
    batch_rows: int = 500

    @classmethod
    def of(cls, settings: Settings) -> RetentionPolicy:
        return cls(jobs_days=settings.retention_jobs_days,
                   webhook_deliveries_days=settings.retention_webhook_deliveries_days,
                   conversation_turns_days=settings.retention_conversation_turns_days,
                   audit_days=settings.retention_audit_days,
                   batch_rows=settings.retention_batch_rows)

    def cutoff(self, kind: Kind, now: datetime) -> datetime | None:
        """Rows of ``kind`` older than this may go; None when the kind is kept for ever."""
        days = getattr(self, kind.days_field)
        return now - days * DAY if days > 0 else None


def _copy_kept(cutoff: datetime) -> ColumnElement[bool]:
    """A cached copy younger than the cutoff points at the job (it serves that job's artifacts)."""
    copy = aliased(JobRow)
    return exists().where(copy.cached_from == JobRow.id, copy.finished_at >= cutoff)


def _job_may_go(cutoff: datetime) -> list[ColumnElement[bool]]:
    return [JobRow.status.in_(TERMINAL), ~_copy_kept(cutoff)]


def _delivery_may_go(_cutoff: datetime) -> list[ColumnElement[bool]]:
    # An attempt out (sending_until set: a manual retry of a given-up delivery) is recorded before it goes.
    return [WebhookDeliveryRow.status.in_(SETTLED_DELIVERIES), WebhookDeliveryRow.sending_until.is_(None)]


@dataclass(frozen=True)
class Kind:
    """A table pruned by age: ``age`` is the time it is measured from, ``may_go`` what else a row must satisfy,
    ``dependants`` the columns of other tables naming its rows' ids (deleted with them)."""

    name: str
    days_field: str
    age: InstrumentedAttribute
    may_go: Callable[[datetime], list[ColumnElement[bool]]] = lambda _cutoff: []
    dependants: dict[str, InstrumentedAttribute] = field(default_factory=dict)
    # PostgreSQL: a statement run first in each batch's transaction (an append-only table's allowed path).
    unlock: str | None = None

    @property
    def table(self) -> Any:
        return self.age.class_

    def conditions(self, cutoff: datetime) -> list[ColumnElement[bool]]:
        return [self.age < cutoff, *self.may_go(cutoff)]

    def candidates(self, cutoff: datetime) -> Select:
        """The ids of the rows that may go, oldest first."""
        return select(self.table.id).where(*self.conditions(cutoff)).order_by(self.age)

    @property
    def kinds(self) -> tuple[str, ...]:
        """This kind's name and its dependants', as they are counted."""
        return (self.name, *self.dependants)


KINDS: tuple[Kind, ...] = (
    Kind("jobs", "jobs_days", JobRow.finished_at, _job_may_go,
         {"artifacts": ArtifactRow.job_id, "agentic_loops": AgenticLoopRow.job_id,
          "profile_runs": ProfileRunRow.job_id}),
    Kind("webhook_deliveries", "webhook_deliveries_days", WebhookDeliveryRow.created_at, _delivery_may_go,
         {"webhook_attempts": WebhookAttemptRow.delivery_id}),
    Kind("conversation_turns", "conversation_turns_days", ConversationTurnRow.created_at),
    Kind("audit_events", "audit_days", AuditEventRow.at, unlock="SET LOCAL agentsearch.audit_prune = on"),
)
PRUNED_KINDS: tuple[str, ...] = tuple(name for kind in KINDS for name in kind.kinds)


@dataclass
class RetentionReport:
    """What a run pruned (or, dry, would prune) per kind, the cutoff of each kind (None: kept for ever), how long it
    took and its longest batch (the longest any row lock was held), and whether it finished (False: its budget ran
    out and the next run goes on)."""

    dry_run: bool
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PRUNED_KINDS, 0))
    cutoffs: dict[str, datetime | None] = field(default_factory=dict)
    seconds: float = 0.0
    longest_batch_s: float = 0.0
    complete: bool = True

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def as_dict(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "counts": self.counts, "total": self.total,
                "cutoffs": {k: v.isoformat() if v else None for k, v in self.cutoffs.items()},
                "seconds": round(self.seconds, 3), "longest_batch_s": round(self.longest_batch_s, 3),
                "complete": self.complete}


def count(s: Session, kind: Kind, cutoff: datetime) -> dict[str, int]:
    """The rows of ``kind`` and of its dependants that would go now."""
    ids = select(kind.table.id).where(*kind.conditions(cutoff))
    counts = {kind.name: s.scalar(select(func.count()).select_from(ids.subquery())) or 0}
    for name, column in kind.dependants.items():
        counts[name] = s.scalar(select(func.count()).where(column.in_(ids))) or 0
    return counts


def take_batch(s: Session, kind: Kind, cutoff: datetime, rows: int) -> list[Any]:
    """The ids of the next ``rows`` rows to go, locked on PostgreSQL (rows another pruner holds are skipped)."""
    query = kind.candidates(cutoff).limit(rows)
    if s.get_bind().dialect.name == "postgresql":
        query = query.with_for_update(of=kind.table, skip_locked=True)
    return list(s.scalars(query))


def delete_batch(s: Session, kind: Kind, cutoff: datetime, ids: list[Any]) -> dict[str, int]:
    """Delete these rows and their dependants (first), in the caller's transaction; the rows deleted per kind.

    The conditions are checked again in the ``DELETE``: a row that stopped qualifying since it was selected stays
    (on SQLite nothing is locked between the two). A dependant goes only with its row.
    """
    if not ids:
        return dict.fromkeys(kind.kinds, 0)
    if kind.unlock and s.get_bind().dialect.name == "postgresql":
        s.execute(text(kind.unlock))
    going = select(kind.table.id).where(kind.table.id.in_(ids), *kind.conditions(cutoff))
    deleted = {}
    for name, column in kind.dependants.items():
        deleted[name] = changed_rows(s, delete(column.class_).where(column.in_(going))
                                     .execution_options(synchronize_session=False))
    deleted[kind.name] = changed_rows(s, delete(kind.table).where(kind.table.id.in_(ids), *kind.conditions(cutoff))
                                      .execution_options(synchronize_session=False))
    return deleted


def prune(db: Database, policy: RetentionPolicy, *, dry_run: bool = False, now: datetime | None = None,
          budget_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> RetentionReport:
    """Prune every kind past its retention, ``policy.batch_rows`` rows a transaction; or, ``dry_run``, count them.

    ``now`` fixes the cutoffs for the whole run (rows that come of age during it wait for the next); ``budget_s``
    bounds the run: no batch starts after it is spent.
    """
    now = now or utcnow()
    started = clock()
    report = RetentionReport(dry_run=dry_run)
    for kind in KINDS:
        cutoff = report.cutoffs[kind.name] = policy.cutoff(kind, now)
        if cutoff is None:
            continue
        if dry_run:
            with db.session() as s:
                report.counts.update(count(s, kind, cutoff))
            continue
        while True:
            batch_started = clock()
            if budget_s is not None and batch_started - started >= budget_s:
                report.complete = False
                break
            with db.session() as s:
                ids = take_batch(s, kind, cutoff, policy.batch_rows)
                for name, deleted in delete_batch(s, kind, cutoff, ids).items():
                    report.counts[name] += deleted
            report.longest_batch_s = max(report.longest_batch_s, clock() - batch_started)
            if len(ids) < policy.batch_rows:
                break
    report.seconds = clock() - started
    return report
