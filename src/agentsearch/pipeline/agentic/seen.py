"""Seen-content dedup across runs: what a user was shown is recorded (per profile, with its source and time), and
later runs skip items seen within the last ``window_days`` — by document id, by URL, and by semantic near-duplicate
(embedding cosine at or above ``near_duplicate``), which catches the same article at another URL (syndicated
copies, tracking parameters, mirrors), which comparing URLs alone misses.

By default the skip is across all of the user's profiles, since a briefing should not show a user again what
another profile showed them in the last days; with ``scope="profile"`` a profile only skips what it showed itself.

Usage::

    store = SqlSeenStore(db)
    store.record(user_id, "research", "job:1234", documents, vectors={doc.id: [...]}, job_id=job_id)
    skip = SeenFilter(store, user_id, "research", SeenPolicy(window_days=5, near_duplicate=0.9), vectors=fn)
    fresh, matches = skip(documents)        # matches: [{"document_id", "reason": "id"|"url"|"near_duplicate", ...}]
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, StrictFloat
from sqlalchemy import select

from agentsearch.pipeline.agentic.signals import cosine
from agentsearch.pipeline.documents import Document
from agentsearch.pipeline.platform.db import Database, utcnow
from agentsearch.pipeline.platform.tables.agentic import SeenContentRow

DocVectors = Callable[[list[Document]], dict[str, list[float]]]


class SeenPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    window_days: StrictFloat = Field(5.0, ge=0.0, le=365.0)
    near_duplicate: StrictFloat | None = Field(0.9, gt=0.0, le=1.0, description="Cosine; None: ids and URLs only.")
    scope: Literal["user", "profile"] = "user"


class SeenItem(BaseModel):
    item_id: str
    collection_id: str = ""
    url: str | None = None
    title: str = ""
    embedding: list[float] | None = None
    profile: str = ""
    source: str = ""
    seen_at: datetime


class SeenStore(Protocol):
    def recent(self, user_id: uuid.UUID, since: datetime, profile: str | None = None) -> list[SeenItem]: ...

    def record(self, user_id: uuid.UUID, profile: str, source: str, documents: list[Document],
               vectors: dict[str, list[float]] | None = None, job_id: uuid.UUID | None = None,
               at: datetime | None = None) -> int: ...


def _aware(value: datetime) -> datetime:
    # SQLite hands datetimes back without a zone; they were written in UTC.
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def match_seen(documents: list[Document], vectors: dict[str, list[float]], recent: list[SeenItem],
               near_duplicate: float | None) -> tuple[list[Document], list[dict[str, Any]]]:
    """Split ``documents`` into the fresh ones and matches of what was seen (id, then URL, then embedding)."""
    by_id = {(i.collection_id, i.item_id): i for i in recent}
    by_url = {i.url: i for i in recent if i.url}
    with_vectors = [i for i in recent if i.embedding]
    fresh: list[Document] = []
    matches: list[dict[str, Any]] = []
    for doc in documents:
        reason, seen, similarity = None, None, None
        key = (str(doc.metadata.get("collection_id", "")), doc.id)
        url = doc.metadata.get("url")
        if key in by_id:
            reason, seen = "id", by_id[key]
        elif url and url in by_url:
            reason, seen = "url", by_url[url]
        elif near_duplicate is not None and doc.id in vectors and with_vectors:
            # with_vectors holds only items with an embedding.
            best = max(with_vectors, key=lambda i: cosine(vectors[doc.id], i.embedding or []))
            similarity = round(cosine(vectors[doc.id], best.embedding or []), 4)
            if similarity >= near_duplicate:
                reason, seen = "near_duplicate", best
        if seen is None:
            fresh.append(doc)
            continue
        matches.append({
            "document_id": doc.id, "reason": reason, "similarity": similarity, "seen_item": seen.item_id,
            "seen_title": seen.title, "seen_at": _aware(seen.seen_at).isoformat(), "source": seen.source,
            "profile": seen.profile,
        })
    return fresh, matches


class SqlSeenStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def recent(self, user_id: uuid.UUID, since: datetime, profile: str | None = None) -> list[SeenItem]:
        query = select(SeenContentRow).where(SeenContentRow.user_id == user_id, SeenContentRow.seen_at >= since)
        if profile is not None:
            query = query.where(SeenContentRow.profile == profile)
        with self.db.session() as s:
            rows = s.scalars(query.order_by(SeenContentRow.seen_at.desc())).all()
            return [SeenItem(item_id=r.item_id, collection_id=r.collection_id, url=r.url, title=r.title,
                             embedding=r.embedding, profile=r.profile, source=r.source, seen_at=_aware(r.seen_at))
                    for r in rows]

    def record(self, user_id: uuid.UUID, profile: str, source: str, documents: list[Document],
               vectors: dict[str, list[float]] | None = None, job_id: uuid.UUID | None = None,
               at: datetime | None = None) -> int:
        """Record what a run returned; a task that runs twice for one job records each item once."""
        vectors = vectors or {}
        added = 0
        with self.db.session() as s:
            already: set[tuple[str, str]] = set()
            if job_id is not None:
                already = {(r.collection_id, r.item_id) for r in s.scalars(
                    select(SeenContentRow).where(SeenContentRow.job_id == job_id, SeenContentRow.profile == profile))}
            for doc in documents:
                key = (str(doc.metadata.get("collection_id", "")), doc.id)
                if key in already:
                    continue
                already.add(key)
                s.add(SeenContentRow(user_id=user_id, profile=profile, collection_id=key[0], item_id=doc.id,
                                  url=doc.metadata.get("url"), title=doc.title or "", embedding=vectors.get(doc.id),
                                  source=source, job_id=job_id, seen_at=at or utcnow()))
                added += 1
        return added


class SeenFilter:
    """The loop's ``skip_seen``: loads the user's recent items once, then filters each batch against them."""

    def __init__(self, store: SeenStore, user_id: uuid.UUID, profile: str, policy: SeenPolicy,
                 vectors: DocVectors | None = None, now: datetime | None = None) -> None:
        self.store, self.user_id, self.profile, self.policy = store, user_id, profile, policy
        self.vectors = vectors
        self.now = now
        self._recent: list[SeenItem] | None = None
        self.error: str | None = None

    def recent(self) -> list[SeenItem]:
        if self._recent is None:
            since = (self.now or utcnow()) - timedelta(days=self.policy.window_days)
            try:
                self._recent = self.store.recent(self.user_id, since,
                                                 self.profile if self.policy.scope == "profile" else None)
            except Exception as exc:  # noqa: BLE001 - a failed lookup costs the dedup, never the job's results
                self.error = f"seen-content lookup failed, nothing skipped: {type(exc).__name__}: {exc}"
                self._recent = []
        return self._recent

    def __call__(self, documents: list[Document]) -> tuple[list[Document], list[dict[str, Any]]]:
        if not self.policy.enabled or not documents:
            return documents, []
        recent = self.recent()
        if not recent:
            return documents, []
        vectors: dict[str, list[float]] = {}
        if self.policy.near_duplicate is not None and self.vectors is not None and any(i.embedding for i in recent):
            try:
                vectors = self.vectors(documents)
            except Exception:  # noqa: BLE001 - without vectors, ids and URLs still match
                vectors = {}
        return match_seen(documents, vectors, recent, self.policy.near_duplicate)
