"""Profile sets as jobs: a run (by a person or by the schedule) is a job row with its first state, linked to the
set by a ``profile_runs`` row; the schedule hands out each due set to exactly one caller.

Usage::

    for set_id in claim_due(db, now):                    # next_run_at moved on in the same transaction
        job_id, state, specs = create_run(db, settings, set_id, registry, trigger="schedule")
        enqueue_job(job_id, specs, state, settings.default_agent_timeout_s)   # specs: its briefing's agents
    with db.session() as s:
        profile_sets_of(s, user_id)                      # oldest first
        total, runs = run_page(s, set_id, limit=20, offset=0)   # [(ProfileRun, Job)], newest first
        remove_profile_set(s, profile_set)               # its runs' links go with it, their jobs stay
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from agentsearch.pipeline.agentic.spec import AgenticSpec
from agentsearch.pipeline.agents.registry import AgentRegistry
from agentsearch.pipeline.job.briefing import briefing_specs
from agentsearch.pipeline.job.job_state import JobState
from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.platform.db import Database, utcnow
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.agentic import ProfileRunRow, ProfileSetRow
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.records.agent_runs import AgentSpec
from agentsearch.pipeline.security.access import Access
from agentsearch.pipeline.security.document_access import job_access


def claim_due(db: Database, now: datetime | None = None) -> list[uuid.UUID]:
    """The enabled, scheduled sets whose time has come; their next run is moved on before anyone else looks."""
    now = now or utcnow()
    with db.session() as s:
        rows = s.scalars(
            select(ProfileSetRow)
            .where(ProfileSetRow.enabled, ProfileSetRow.schedule_s.is_not(None), ProfileSetRow.next_run_at <= now)
            .with_for_update(skip_locked=True)
        ).all()
        for row in rows:
            row.next_run_at = now + timedelta(seconds=row.schedule_s or 0)  # not None: selected so
        return [row.id for row in rows]


def spec_for(row: ProfileSetRow, settings: Settings) -> AgenticSpec:
    options = row.options or {}
    return AgenticSpec.for_request(options.get("iterative"), row.profiles, options.get("seen"), settings.test_mode,
                                   settings.seen_window_days, settings.seen_near_duplicate,
                                   source=f"profile_set:{row.id}")


def create_run(db: Database, settings: Settings, set_id: uuid.UUID, registry: AgentRegistry, trigger: str = "manual",
               user_id: uuid.UUID | None = None) -> tuple[str, JobState, list[AgentSpec]] | None:
    """A queued job for one run of the set, with the response agents of its briefing (``options.agents``) to
    enqueue it with; None when the set is gone or, with ``user_id``, not that user's."""
    with db.session() as s:
        row = s.get(ProfileSetRow, set_id)
        if row is None or (user_id is not None and row.user_id != user_id):
            return None
        spec = spec_for(row, settings)
        wanted = [row.collection_id, *(c for p in spec.profiles for c in p.collections)]
        epochs: dict[str, int] = {}
        for collection_id in dict.fromkeys(wanted):
            collection = s.get(CollectionRow, collection_id)
            if collection is not None and Access(s, row.user_id).held(collection) is not None:
                epochs[str(collection_id)] = collection.index_epoch
        query, job_id = row.query or row.name, uuid.uuid4()
        # Over a team collection a run finds what its user's document groups let it, read now: as a search would.
        access = job_access(s, epochs, row.user_id)
        searched = access.applied(None) if access is not None else None
        search = {"filter": searched} if searched is not None else {}
        state = JobState(job_id=str(job_id), collection_id=str(row.collection_id), user_id=str(row.user_id),
                         query=query, original_query=query, top_k=settings.max_top_k, collections=epochs,
                         agentic=spec.model_dump(mode="json"), search=search,
                         access_tokens=access.held if access is not None else None)
        specs = briefing_specs((row.options or {}).get("agents"), registry)
        JobStore(db).create(s, job_id, row.user_id, row.collection_id, query,
                            request={"profile_set_id": str(row.id), "mode": "iterative", "trigger": trigger},
                            deadline_s=settings.job_deadline_s, state=state,
                            # What runs, as a search's snapshot says: the reaper enqueues a lost job again from it.
                            snapshot=[spec.model_dump(mode="json") for spec in specs],
                            access_groups=access.held if access is not None else None)
        s.add(ProfileRunRow(profile_set_id=row.id, job_id=job_id, trigger=trigger))
        row.last_run_at = utcnow()
        return str(job_id), state, specs


def profile_sets_of(s: Session, user_id: uuid.UUID) -> list[ProfileSetRow]:
    """The user's profile sets, oldest first."""
    return list(s.scalars(select(ProfileSetRow).where(ProfileSetRow.user_id == user_id)
                          .order_by(ProfileSetRow.created_at, ProfileSetRow.id)))


def remove_profile_set(s: Session, row: ProfileSetRow) -> None:
    """Delete the set in the caller's transaction; the database deletes its ``profile_runs`` rows with it
    (``ON DELETE CASCADE``); its runs' jobs stay."""
    s.delete(row)


def run_page(s: Session, set_id: uuid.UUID, limit: int, offset: int) -> tuple[int, list[tuple[ProfileRunRow, JobRow]]]:
    """How many runs the set has, and a page of them with their jobs, newest first."""
    query = (select(ProfileRunRow, JobRow).join(JobRow, JobRow.id == ProfileRunRow.job_id)
             .where(ProfileRunRow.profile_set_id == set_id))
    total = s.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = s.execute(query.order_by(ProfileRunRow.created_at.desc(), ProfileRunRow.id).limit(limit).offset(offset))
    return total, list(rows.tuples().all())
