"""What one user reaches: its personal collections wholly, its teams' collections by its role, and their jobs.

The one place a collection, or a job over collections, is found for a user. A personal collection is its owner's
alone (``owner`` covers every role); a team collection is reached by the team's members with their role, read from
``team_members`` on every call, so a change of membership counts from the next request. What is not reached answers
404 in the words of a missing id; what is reached with too low a role answers 403 naming the role needed
(``agentsearch.pipeline.security.roles``).

A job is seen by a user who reaches every collection it searched (its own, ``also_search``, its profiles'): its
submitter's personal ones are hidden from the other members, so a member reads another's job over a team collection
only when nothing else was searched. A member removed from the team no longer reads its jobs over the team's
collections, its own included. Nor does one who lacks a document group the job searched with, or one of whose sources
it no longer finds (``agentsearch.pipeline.security.document_access``).

Usage::

    access = Access(s, user_id)
    collection = access.collection(collection_id, "editor", lock=True)    # Refusal 404 / 403, or the row
    team, role = access.team(team_id, "admin")                            # the same for a team itself
    job = access.job(job_id, "viewer")                                    # the submitter's own job needs viewer
    access.listed_collections()                                           # personal and the teams'
    access.named_collections("support/handbook")                         # a team's, by the team's name
    access.sees_job(job)
    access.owned(WebhookRow, webhook_id, "webhook")                        # a personal thing: its owner's alone
    total, jobs = access.job_page(status="running", within=None, limit=20, offset=0)
"""

from __future__ import annotations

import uuid
from typing import Protocol, TypeVar

from sqlalchemy import or_, select
from sqlalchemy.orm import Session, load_only

from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.platform.tables.teams import TeamMemberRow, TeamRow
from agentsearch.pipeline.refusal import missing
from agentsearch.pipeline.security.document_access import groups_within, held_tokens, job_visible
from agentsearch.pipeline.security.key_limits import KeyLimits, searched_collections
from agentsearch.pipeline.security.roles import Held, Role, beyond_role, covers


class _PersonalRow(Protocol):
    user_id: uuid.UUID


# A user's personal thing: a webhook, a profile set, a conversation, an agent config (a row with its user's id).
Owned = TypeVar("Owned", bound=_PersonalRow)


# What a listing shows of a job and what ``sees_job`` reads of it (not its state, response or logs).
LISTED_COLUMNS = (JobRow.id, JobRow.user_id, JobRow.collection_id, JobRow.query, JobRow.status, JobRow.stage,
                  JobRow.request, JobRow.initial_state, JobRow.access_groups, JobRow.cached_from, JobRow.created_at,
                  JobRow.finished_at)


class Access:
    def __init__(self, s: Session, user_id: uuid.UUID) -> None:
        self.s, self.user_id = s, user_id
        self._held: dict[uuid.UUID, Held | None] = {}
        self._tokens: frozenset[str] | None = None

    @property
    def tokens(self) -> frozenset[str]:
        """The caller's document groups (``agentsearch.pipeline.security.document_access``), read once per
        ``Access``."""
        if self._tokens is None:
            self._tokens = held_tokens(self.s, self.user_id)
        return self._tokens

    def held(self, collection: CollectionRow) -> Held | None:
        """The caller's role over the collection: ``owner``, a team role, or None (not reached)."""
        if collection.id not in self._held:
            if collection.team_id is None:
                role: Held | None = "owner" if collection.user_id == self.user_id else None
            else:
                role = self.role_in(collection.team_id)
            self._held[collection.id] = role
        return self._held[collection.id]

    def collection(self, collection_id: uuid.UUID, needed: Role, lock: bool = False,
                   what: str | None = None) -> CollectionRow:
        """The collection, reached with ``needed``; 404 when not reached at all, 403 naming the role when reached
        with less. ``lock`` holds its row until the transaction ends (PostgreSQL's FOR UPDATE)."""
        collection = self.s.get(CollectionRow, collection_id, with_for_update=lock)
        held = self.held(collection) if collection is not None else None
        if collection is None or held is None:
            raise missing("collection", collection_id)
        if not covers(held, needed):
            team = self.s.get(TeamRow, collection.team_id)
            assert team is not None  # a personal collection's owner holds every role: only a team's is held with less
            raise beyond_role(needed, held, what or f"this on collection {collection.name!r}", team.name)
        return collection

    def sees_job(self, job: JobRow) -> bool:
        searched = searched_collections(job)
        if searched is None:  # a profile set's run not yet started: its submitter's alone
            if job.user_id != self.user_id:
                return False
            searched = frozenset({job.collection_id})
        for collection_id in searched:
            collection = self.s.get(CollectionRow, collection_id)
            if collection is None:
                if job.user_id != self.user_id:
                    return False
            elif self.held(collection) is None:
                return False
        shared = self.s.get(CollectionRow, job.collection_id)
        if not (job.user_id == self.user_id or (shared is not None and shared.team_id is not None)):
            return False
        # Over a team collection: the caller holds the document groups the job searched with, and each of its
        # sources is still one it finds (a membership or a document's groups may have changed since).
        return job.access_groups is None or job_visible(self.s, job, self.tokens)

    def job(self, job_id: uuid.UUID, needed: Role = "viewer", what: str | None = None) -> JobRow:
        """The job when the caller sees it (404 otherwise). Another member's job needs ``needed`` over the job's
        collection (403 naming it); the submitter's own needs only to be seen."""
        job = self.s.get(JobRow, job_id)
        if job is None or not self.sees_job(job):
            raise missing("job", job_id)
        if job.user_id != self.user_id:
            self.collection(job.collection_id, needed, what=what or f"this on another member's job {job_id}")
        return job

    def owned(self, row_type: type[Owned], ident: uuid.UUID, what: str, lock: bool = False) -> Owned:
        """The caller's own personal thing; another user's is refused (404) in the words of a missing one."""
        row = self.s.get(row_type, ident, with_for_update=lock)
        if row is None or row.user_id != self.user_id:
            raise missing(what, ident)
        return row

    def role_in(self, team_id: uuid.UUID) -> Role | None:
        """The caller's role in the team, read now (a change of membership counts from the next read); None: not a
        member."""
        return self.s.scalar(select(TeamMemberRow.role).where(TeamMemberRow.team_id == team_id,
                                                           TeamMemberRow.user_id == self.user_id))

    def team(self, team_id: uuid.UUID, needed: Role, what: str = "this", lock: bool = False) -> tuple[TeamRow, Role]:
        """The team and the caller's role in it, when that covers ``needed``: 404 for a non-member, 403 naming it.
        ``lock`` holds the team's row until the transaction ends (a change of its members or groups)."""
        team = self.s.get(TeamRow, team_id, with_for_update=lock)
        role = self.role_in(team_id)
        if team is None or role is None:
            raise missing("team", team_id)
        if not covers(role, needed):
            raise beyond_role(needed, role, what, team.name)
        return team, role

    def team_ids(self) -> list[uuid.UUID]:
        return list(self.s.scalars(select(TeamMemberRow.team_id).where(TeamMemberRow.user_id == self.user_id)).all())

    def listed_collections(self):
        """A query of the collections the caller reaches: its personal ones and its teams'."""
        reached = or_(CollectionRow.team_id.in_(self.team_ids()),
                      (CollectionRow.user_id == self.user_id) & CollectionRow.team_id.is_(None))
        return select(CollectionRow).where(reached)

    def named_collections(self, name: str):
        """A query of the collections ``name`` names: ``team/name`` the team's; a plain name the caller's personal
        one, or when it has none, every team's of that name (several: the caller must say which)."""
        team, _, plain = name.rpartition("/")
        query = self.listed_collections().where(CollectionRow.name == plain)
        if team:
            return query.join(TeamRow, TeamRow.id == CollectionRow.team_id).where(TeamRow.name == team)
        personal = query.where(CollectionRow.team_id.is_(None))
        return personal if self.s.scalar(select(personal.exists())) else query

    def listed_jobs(self):
        """A query of the jobs the caller may see, before ``sees_job``: its own over a collection it still reaches,
        and every member's over its teams' collections; of these, those run with no document group the caller
        lacks. Narrowed in SQL by the job's own collection; what only the row's JSON says (another collection it
        searched, a source since restricted) is ``sees_job``'s."""
        shared = select(CollectionRow.id).where(CollectionRow.team_id.in_(self.team_ids()))
        reached = self.listed_collections().with_only_columns(CollectionRow.id)
        return select(JobRow).where(or_((JobRow.user_id == self.user_id) & JobRow.collection_id.in_(reached),
                                     JobRow.collection_id.in_(shared)),
                                 groups_within(JobRow.access_groups, self.tokens, self.s.bind.dialect.name))

    def collection_page(self, name: str | None, within: frozenset[uuid.UUID] | None) -> list[CollectionRow]:
        """The collections the caller reaches (``name``: those it names), oldest first; ``within``: of these only."""
        query = self.listed_collections() if name is None else self.named_collections(name)
        if within is not None:
            query = query.where(CollectionRow.id.in_(within))
        return list(self.s.scalars(query.order_by(CollectionRow.created_at, CollectionRow.id)))

    def reached_ids(self, collection_ids: list[uuid.UUID]) -> set[uuid.UUID]:
        """Which of these collections the caller reaches."""
        return set(self.s.scalars(self.listed_collections().with_only_columns(CollectionRow.id)
                                  .where(CollectionRow.id.in_(collection_ids))))

    def job_page(self, status: str | None, within: frozenset[uuid.UUID] | None, limit: int,
                 offset: int) -> tuple[int, list[JobRow]]:
        """A page of the jobs the caller sees, newest first, and how many it sees in all: the count and the page are
        one filtered list, so ``total`` counts exactly what the pages list. ``within``: the collections of the
        caller's key, which sees a job only when it searched nothing else (``KeyLimits.sees_job``)."""
        query = self.listed_jobs()
        if within is not None:
            query = query.where(JobRow.collection_id.in_(within))
        if status:
            query = query.where(JobRow.status == status)
        key = KeyLimits(collections=within)
        # Every candidate is checked, since what a job searched besides its own collection is in its JSON; the
        # large columns are left unread (a job searched with document groups reads its sources on demand).
        candidates = self.s.scalars(query.options(load_only(*LISTED_COLUMNS))
                                    .order_by(JobRow.created_at.desc(), JobRow.id))
        total, page = 0, []
        for job in candidates:
            if key.sees_job(job) and self.sees_job(job):
                if offset <= total < offset + limit:
                    page.append(job)
                total += 1
        return total, page
