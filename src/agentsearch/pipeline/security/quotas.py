"""Rate limits and quotas per user: what one user may do, from the settings' defaults and an operator's overrides.

Requests fall in three classes, each counted per user and minute (``agentsearch.pipeline.security.rate_windows``):
search submissions (anything that starts a job), ingestion (documents sent), and reads (every other request). Two quotas
are counted in the database when they are checked: the user's jobs queued or running, and its documents stored.
The probes and ``/metrics`` are in no class: they are never limited.

Usage::

    quotas = QuotaStore(db)
    limits = quotas.effective(user_id, Limits.defaults(settings))   # the defaults overlaid by the user's own
    limits, running = quotas.effective_and_running(user_id, Limits.defaults(settings))   # and its jobs, at once
    limits.per_minute("search")                                      # 60
    route_class("POST", "/v1/search")                                # "search"
    quotas.set_overrides("alice", LimitOverrides(searches_per_minute=5))
"""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from agentsearch.pipeline.platform.db import Database
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.collections import CollectionRow, DocumentRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.platform.tables.users import UserLimitRow, UserRow
from agentsearch.pipeline.refusal import Refusal
from agentsearch.pipeline.security.users import user_id_named

RouteClass = Literal["search", "ingest", "read"]
ROUTE_CLASSES: tuple[RouteClass, ...] = ("search", "ingest", "read")

# Routes that start a job: each is a search submission, and each must fit under the user's running-jobs limit.
SEARCH_ROUTES = frozenset({("POST", "/v1/search"), ("POST", "/v1/profile-sets/{set_id}/runs")})
INGEST_ROUTES = frozenset({("POST", "/v1/collections/{collection_id}/documents"),
                           ("POST", "/v1/collections/{collection_id}/files"),
                           ("POST", "/v1/collections/{collection_id}/sources/{source_id}/runs")})
# A probe or a scrape refused for being frequent would read as the service being down.
UNLIMITED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})

# The largest value the database's INTEGER columns hold.
MAX_LIMIT = 2**31 - 1
ACTIVE_JOB_STATUSES = ("queued", "running")


def route_class(method: str, path: str) -> RouteClass | None:
    """The class a request counts in, from its method and its route's path template; None: never limited."""
    if path in UNLIMITED_PATHS:
        return None
    key = (method.upper(), path)
    if key in SEARCH_ROUTES:
        return "search"
    if key in INGEST_ROUTES:
        return "ingest"
    return "read"


class Limits(BaseModel):
    """One user's limits in force. 0 allows none (a way to pause a user without revoking its keys)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    searches_per_minute: int = Field(ge=0, le=MAX_LIMIT)
    reads_per_minute: int = Field(ge=0, le=MAX_LIMIT)
    ingest_per_minute: int = Field(ge=0, le=MAX_LIMIT)
    max_running_jobs: int = Field(ge=0, le=MAX_LIMIT)
    max_documents: int = Field(ge=0, le=MAX_LIMIT)

    @classmethod
    def defaults(cls, settings: Settings) -> Limits:
        return cls(
            searches_per_minute=settings.rate_limit_searches_per_minute,
            reads_per_minute=settings.rate_limit_reads_per_minute,
            ingest_per_minute=settings.rate_limit_ingest_per_minute,
            max_running_jobs=settings.max_running_jobs,
            max_documents=settings.max_documents,
        )

    def per_minute(self, kind: RouteClass) -> int:
        return {"search": self.searches_per_minute, "ingest": self.ingest_per_minute,
                "read": self.reads_per_minute}[kind]

    def overlaid(self, overrides: LimitOverrides) -> Limits:
        """These limits with every value the overrides set put in place of the default."""
        return self.model_copy(update=overrides.model_dump(exclude_none=True))


LIMIT_NAMES: tuple[str, ...] = tuple(Limits.model_fields)


class LimitOverrides(BaseModel):
    """An operator's values for one user; None keeps the default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    searches_per_minute: int | None = Field(None, ge=0, le=MAX_LIMIT)
    reads_per_minute: int | None = Field(None, ge=0, le=MAX_LIMIT)
    ingest_per_minute: int | None = Field(None, ge=0, le=MAX_LIMIT)
    max_running_jobs: int | None = Field(None, ge=0, le=MAX_LIMIT)
    max_documents: int | None = Field(None, ge=0, le=MAX_LIMIT)

    def merged(self, newer: LimitOverrides) -> LimitOverrides:
        """These overrides with the values ``newer`` sets replacing them."""
        return self.model_copy(update=newer.model_dump(exclude_none=True))

    def set_names(self) -> list[str]:
        return [name for name, value in self.model_dump().items() if value is not None]


class QuotaError(ValueError):
    """An operator's request about limits that cannot be done, with a message for whoever asked."""


def overrides_of(s: Session, user_id: uuid.UUID) -> LimitOverrides:
    row = s.get(UserLimitRow, user_id)
    if row is None:
        return LimitOverrides()
    return LimitOverrides(**{name: getattr(row, name) for name in LIMIT_NAMES})


def running_jobs(s: Session, user_id: uuid.UUID) -> int:
    """The user's jobs queued or running now (one read of the ``(user_id, status)`` index)."""
    return s.scalar(select(func.count()).select_from(JobRow)
                    .where(JobRow.user_id == user_id, JobRow.status.in_(ACTIVE_JOB_STATUSES))) or 0


def effective_and_running(s: Session, user_id: uuid.UUID, defaults: Limits) -> tuple[Limits, int]:
    """The user's limits in force and its jobs queued or running, in one statement (one round trip: a search's
    admission reads both)."""
    running = (select(func.count()).select_from(JobRow)
               .where(JobRow.user_id == user_id, JobRow.status.in_(ACTIVE_JOB_STATUSES)).scalar_subquery())
    row = s.execute(select(running, *(getattr(UserLimitRow, name) for name in LIMIT_NAMES)).select_from(UserRow)
                    .outerjoin(UserLimitRow, UserLimitRow.user_id == UserRow.id)
                    .where(UserRow.id == user_id)).one_or_none()
    if row is None:
        return defaults, running_jobs(s, user_id)  # no such user: the defaults, as ``overrides_of`` gives them
    overrides = LimitOverrides(**dict(zip(LIMIT_NAMES, row[1:], strict=True)))
    return defaults.overlaid(overrides), row[0] or 0


def has_idempotent_job(s: Session, user_id: uuid.UUID, idempotency_key: str) -> bool:
    """True when the user already has a job for this ``Idempotency-Key``: sending it again starts nothing."""
    return s.scalar(select(JobRow.id).where(JobRow.user_id == user_id, JobRow.idempotency_key == idempotency_key)
                    .limit(1)) is not None


def documents_stored(s: Session, user_id: uuid.UUID) -> int:
    """The user's documents across its collections, whatever their indexing status."""
    return s.scalar(select(func.count()).select_from(DocumentRow)
                    .join(CollectionRow, CollectionRow.id == DocumentRow.collection_id)
                    .where(CollectionRow.user_id == user_id)) or 0


def chunks_stored(s: Session, collection_ids: list[uuid.UUID]) -> int:
    """The chunks these collections' documents were indexed as (a document not yet indexed counts none)."""
    return s.scalar(select(func.coalesce(func.sum(DocumentRow.chunks), 0))
                    .where(DocumentRow.collection_id.in_(collection_ids))) or 0


def check_chunk_limit(s: Session, collection_id: uuid.UUID, adding: int, limit: int) -> None:
    """Refuse (413) new documents for a collection that holds ``limit`` chunks already, before any is written. A
    document's chunks are known once it is indexed: documents sent before the limit was reached still finish."""
    stored = chunks_stored(s, [collection_id]) if adding > 0 else 0
    if stored >= limit:
        raise Refusal(413, f"this collection holds {stored:,} chunks, its limit of {limit:,}; delete documents, "
                           "add these to another collection, or ask the operator for a larger limit "
                           "(AGENTSEARCH_MAX_COLLECTION_CHUNKS)")


def check_document_quota(s: Session, user_id: uuid.UUID, adding: int, limit: int) -> None:
    """Refuse (413) a request that would take the user's stored documents past ``limit``, before any is written.

    The user's row is locked for the rest of the transaction (PostgreSQL's FOR UPDATE), so two ingests of one
    user take turns between counting and writing and cannot pass the quota together.
    """
    if adding <= 0:
        return  # replacing documents already stored never adds to the count
    s.get(UserRow, user_id, with_for_update=True)
    stored = documents_stored(s, user_id)
    if stored + adding > limit:
        # 413, not 429: waiting does not help, only deleting documents or a larger quota does; not 422: the
        # documents themselves are fine.
        raise Refusal(413, f"this request would store {adding} more document(s) but {stored} of your quota of "
                           f"{limit} are stored; delete documents or ask the operator for a larger quota")


class QuotaStore:
    """Limits and usage read from the database, and an operator's overrides written to it."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def effective(self, user_id: uuid.UUID, defaults: Limits) -> Limits:
        with self.db.session() as s:
            return defaults.overlaid(overrides_of(s, user_id))

    def running_jobs(self, user_id: uuid.UUID) -> int:
        with self.db.session() as s:
            return running_jobs(s, user_id)

    def effective_and_running(self, user_id: uuid.UUID, defaults: Limits) -> tuple[Limits, int]:
        """``effective`` and ``running_jobs`` in one transaction: a search's admission reads both at once."""
        with self.db.session() as s:
            return effective_and_running(s, user_id, defaults)

    def documents_stored(self, user_id: uuid.UUID) -> int:
        with self.db.session() as s:
            return documents_stored(s, user_id)

    def has_idempotent_job(self, user_id: uuid.UUID, idempotency_key: str) -> bool:
        with self.db.session() as s:
            return has_idempotent_job(s, user_id, idempotency_key)

    def user_id(self, name: str) -> uuid.UUID:
        return user_id_named(self.db, name, QuotaError)

    def overrides(self, name: str) -> LimitOverrides:
        user_id = self.user_id(name)
        with self.db.session() as s:
            return overrides_of(s, user_id)

    def set_overrides(self, name: str, values: LimitOverrides, reset: bool = False) -> LimitOverrides:
        """Set the values given for a user, keeping its other overrides (all dropped first with ``reset``)."""
        user_id = self.user_id(name)
        with self.db.session() as s:
            row = s.get(UserLimitRow, user_id, with_for_update=True)
            current = LimitOverrides() if reset or row is None else overrides_of(s, user_id)
            merged = current.merged(values)
            if not merged.set_names():
                if row is not None:
                    s.delete(row)
                return merged
            if row is None:
                row = UserLimitRow(user_id=user_id)
                s.add(row)
            for field, value in merged.model_dump().items():
                setattr(row, field, value)
            return merged
