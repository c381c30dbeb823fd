"""Agentic modes as jobs: what a job asks for (``AgenticSpec``), the loops it runs (one per profile, or one for the
query), where each loop's state is kept between its tasks (``LoopStore``), and what the job reports at the end.

The loops of a job run side by side, each as a chain of tasks that enqueue their successor. They meet through the
database: ``LoopStore.finish`` marks a loop done and, under a lock on the job's row, tells the caller whether it
was the last one; only that caller goes on to merge.

Usage::

    spec = AgenticSpec.for_request({"target": 3}, profiles=None, seen=None, test_mode=False)
    spec = checked_spec(body.iterative, body.profiles, body.seen, settings)   # a Refusal names the field at fault
    plans = spec.plans(query, state.collections)              # [LoopPlan(profile="", query=..., config=..., ...)]
    store = LoopStore(db)
    store.start(job_id, plans[0].profile, LoopState.start(plans[0].query, plans[0].config))
    last = store.finish(job_id, profile, final_state)          # True for the loop that ended last
    summary = agentic_summary(spec, store.states(job_id))
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import func, select, update

from agentsearch.pipeline.agentic.config import IterativeConfig, reduced_for_test_mode
from agentsearch.pipeline.agentic.loop import LoopState, final_documents
from agentsearch.pipeline.agentic.profiles import Profile, ProfileSet, merge_by_category
from agentsearch.pipeline.agentic.runtime import SearchTarget
from agentsearch.pipeline.agentic.seen import SeenPolicy
from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.platform.db import Database
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.agentic import AgenticLoopRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.refusal import invalid_fields


class AgenticSpec(BaseModel):
    """The agentic part of a job, carried in ``JobState.agentic``."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["iterative"] = "iterative"
    iterative: IterativeConfig = Field(default_factory=IterativeConfig)
    profiles: list[Profile] = Field(default_factory=list, max_length=10)
    seen: SeenPolicy = Field(default_factory=lambda: SeenPolicy(enabled=False))
    source: str = Field("job", description="Recorded with what the job returned: job or schedule:<profile set>.")

    @classmethod
    def for_request(cls, iterative: dict[str, Any] | None, profiles: list[dict[str, Any]] | None,
                    seen: dict[str, Any] | None, test_mode: bool, window_days: float = 5.0,
                    near_duplicate: float = 0.9, source: str = "job") -> AgenticSpec:
        """Validated from a request's parts. Seen-content dedup is on by default for profiles (briefings should
        not repeat themselves) and off for a plain iterative search (asking twice should answer twice)."""
        config = IterativeConfig.model_validate(iterative or {})
        if test_mode:
            config = reduced_for_test_mode(config)
        parsed = list(ProfileSet(profiles=profiles).profiles) if profiles else []
        for profile in parsed:
            profile.iterative_config(config)  # a combination that does not hold is refused now, not in a worker
        policy = SeenPolicy.model_validate({"enabled": bool(parsed), "window_days": window_days,
                                            "near_duplicate": near_duplicate, **(seen or {})})
        return cls(iterative=config, profiles=parsed, seen=policy, source=source)

    def plans(self, query: str, collections: dict[str, int], test_mode: bool = False) -> list[LoopPlan]:
        """One loop per profile (its own query, config and collections), or one loop for the query itself."""
        default_targets = [SearchTarget(f"c_{uuid.UUID(c).hex}", c, epoch) for c, epoch in collections.items()]
        if not self.profiles:
            return [LoopPlan("", query, self.iterative, default_targets)]
        plans = []
        for profile in self.profiles:
            config = profile.iterative_config(self.iterative)
            if test_mode:
                config = reduced_for_test_mode(config)
            targets = [SearchTarget(f"c_{c.hex}", str(c), collections.get(str(c), 0)) for c in profile.collections]
            plans.append(LoopPlan(profile.name, profile.render(query), config, targets or default_targets))
        return plans


def checked_spec(iterative: dict[str, Any] | None, profiles: list[dict[str, Any]] | None,
                 seen: dict[str, Any] | None, settings: Settings, source: str = "job") -> AgenticSpec:
    """``AgenticSpec.for_request`` for a request's parts, each validated on its own first, so the ``Refusal``
    (``agentsearch.pipeline.refusal``) names the field that is wrong."""
    for loc, check in ((("body", "iterative"), lambda: IterativeConfig.model_validate(iterative or {})),
                       (("body", "seen"), lambda: SeenPolicy.model_validate(seen or {}))):
        try:
            check()
        except ValidationError as exc:
            raise invalid_fields(loc, exc) from None
    if profiles:
        try:
            ProfileSet(profiles=profiles)
        except ValidationError as exc:
            raise invalid_fields(("body",), exc) from None
    try:
        return AgenticSpec.for_request(iterative, profiles, seen, settings.test_mode, settings.seen_window_days,
                                       settings.seen_near_duplicate, source=source)
    except ValidationError as exc:  # a profile's overrides that do not fit the iterative settings
        raise invalid_fields(("body", "profiles"), exc) from None


@dataclass(frozen=True)
class LoopPlan:
    profile: str
    query: str
    config: IterativeConfig
    targets: list[SearchTarget]


class LoopStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def _row(self, s, job_id: str, profile: str) -> AgenticLoopRow | None:
        return s.scalar(select(AgenticLoopRow).where(AgenticLoopRow.job_id == uuid.UUID(job_id),
                                                  AgenticLoopRow.profile == profile))

    def start(self, job_id: str, profile: str, state: LoopState) -> bool:
        """Record a loop's first state; False when it was already started (a redelivered task must not fork it)."""
        with self.db.session() as s:
            if self._row(s, job_id, profile) is not None:
                return False
            s.add(AgenticLoopRow(job_id=uuid.UUID(job_id), profile=profile, state=state.dump(), iteration=0))
            return True

    def save(self, job_id: str, profile: str, state: LoopState) -> bool:
        """Keep the state after an iteration; False when the row is further on already (a redelivered task)."""
        with self.db.session() as s:
            row = self._row(s, job_id, profile)
            if row is None or row.status == "done" or row.iteration >= state.iteration:
                return False
            row.state, row.iteration = state.dump(), state.iteration
            return True

    def finish(self, job_id: str, profile: str, state: LoopState) -> bool:
        """Mark the loop done; True only for the call that completes the job's last running loop."""
        job = uuid.UUID(job_id)
        with self.db.session() as s:
            # The job's row is the lock: two loops ending at once cannot both see themselves as the last.
            s.scalar(select(JobRow).where(JobRow.id == job).with_for_update())
            # Written before the others are counted: SQLite ignores FOR UPDATE, but a write holds its one writer's
            # lock, so the second loop to end counts after the first one's commit (a read first would let both
            # count the other as running, and the job would never be finished).
            marked = s.execute(update(AgenticLoopRow)
                               .where(AgenticLoopRow.job_id == job, AgenticLoopRow.profile == profile,
                                      AgenticLoopRow.status != "done")
                               .values(state=state.dump(), iteration=state.iteration, status="done"))
            if marked.rowcount != 1:  # type: ignore[attr-defined]
                return False
            running = s.scalar(select(func.count()).select_from(AgenticLoopRow)
                               .where(AgenticLoopRow.job_id == job, AgenticLoopRow.status != "done"))
            return running == 0

    def running(self, job_id: str) -> dict[str, LoopState]:
        """The loops not yet done, at their last saved state: where a retried job picks up."""
        with self.db.session() as s:
            rows = s.scalars(select(AgenticLoopRow).where(AgenticLoopRow.job_id == uuid.UUID(job_id),
                                                       AgenticLoopRow.status != "done")).all()
            return {r.profile: LoopState.load(r.state) for r in rows}

    def states(self, job_id: str) -> dict[str, LoopState]:
        with self.db.session() as s:
            rows = s.scalars(select(AgenticLoopRow).where(AgenticLoopRow.job_id == uuid.UUID(job_id))).all()
            return {r.profile: LoopState.load(r.state) for r in rows}


def loop_summary(state: LoopState) -> dict[str, Any]:
    """A loop as the job's response shows it: why it stopped and what each iteration did."""
    return {
        "query": state.query,
        "budget": state.budget,
        "iterations": state.iteration,
        "stop_reason": state.stop_reason,
        "llm_off": state.llm_off, "llm_off_iteration": state.llm_off_iteration,
        "kept": len(state.kept),
        "history": [
            {
                "iteration": r.iteration, "queries": r.queries, "threshold": r.threshold, "method": r.method,
                "evaluated": r.evaluated, "kept": r.kept, "discarded": r.discarded,
                "skipped_memo": r.skipped_memo, "skipped_earlier": r.skipped_earlier,
                "evaluation_error": r.evaluation_error,
                "guard": r.guard.model_dump() if r.guard else None,
                "grade": r.grade.model_dump() if r.grade else None,
                "refinement": r.refinement.model_dump() if r.refinement else None,
                "decision": r.decision, "duration_ms": r.duration_ms,
            }
            for r in state.history
        ],
    }


def job_documents(spec: AgenticSpec, states: dict[str, LoopState], limit: int) -> tuple[list[Document], dict[str, Any]]:
    """The documents the rest of the job works on, and ``metadata.agentic``: per-loop summaries, and for profiles
    the results merged by category."""
    summary: dict[str, Any] = {"mode": spec.mode, "seen": spec.seen.model_dump()}
    if not spec.profiles:
        state = states.get("")
        judged = final_documents(state) if state else []
        summary["loop"] = loop_summary(state) if state else None
        documents = [_scored(j) for j in judged]
        return documents[:limit], summary
    finals = {p.name: final_documents(states[p.name]) if p.name in states else [] for p in spec.profiles}
    merged = merge_by_category(finals)
    summary["loops"] = {name: loop_summary(state) for name, state in states.items()}
    summary["results"] = merged
    documents = []
    for category, judged in finals.items():
        listed = {(i["collection_id"], i["document_id"]) for i in merged[category]}
        documents += [_scored(j, category) for j in judged
                      if (j.document.metadata.get("collection_id"), j.document.id) in listed]
    documents.sort(key=lambda d: d.metadata["evaluation_overall"] or 0.0, reverse=True)
    return documents[:limit], summary


def _scored(judged, category: str | None = None) -> Document:
    extra: dict[str, Any] = {"evaluation_overall": judged.evaluation.overall, "iteration": judged.iteration}
    if category is not None:
        extra["category"] = category
    return judged.document.model_copy(update={"metadata": {**judged.document.metadata, **extra}})
