"""The documents an answer cites, at the version it read, and the answers marked stale when one of them changes.

A document's version is the content digest of its indexed chunks (``indexing.content_digest``, the digest every chunk
id carries: ``document_id#digest-n``). A finished job records the version of each document it cites
(``record_citations``, in the transaction that ends it); indexing a document again at another digest
(``mark_changed``, in the transaction that marks it indexed) or deleting it (``mark_deleted``, in the one that deletes
its row) marks every answer citing it stale at once: one indexed ``UPDATE``, whatever the number of answers. A job
that ends after its document changed (it read the old chunks while the new ones were indexed) is born stale: its
citations are compared with the documents' versions as they are recorded.

A mark says only which document and how (``changed`` or ``deleted``); the answer cited the document, so whoever reads
the job could read its id already. Nothing of the new content is in it.

Usage::

    with db.session() as s:
        record_citations(s, job_id, [Cited(collection_id, "handbook", "3fa4c1d2e0")])
        mark_changed(s, collection_id, {"handbook": "9b01aa72c4"})     # every answer citing another version
        mark_deleted(s, collection_id, "handbook")
        stale_marks(s, [job_id])            # {job_id: {"handbook": "deleted"}}, a cached copy's from its source
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import ColumnElement, exists, or_, select, update
from sqlalchemy.orm import InstrumentedAttribute, Session

from agentsearch.pipeline.platform.db import utcnow
from agentsearch.pipeline.platform.tables.answers import JobCitationRow
from agentsearch.pipeline.platform.tables.collections import DocumentRow
from agentsearch.pipeline.platform.tables.jobs import JobRow

Staleness = Literal["changed", "deleted"]
# ``document_id#<digest>-<n>``: the digest is ``content_digest``'s 10 hex digits.
_CHUNK_VERSION = re.compile(r"#([0-9a-f]{6,64})-\d+$")


@dataclass(frozen=True)
class Cited:
    """One document an answer cites: its collection, its id, and the version of the chunks the answer read."""

    collection_id: uuid.UUID
    document_id: str
    version: str | None


def chunk_version(chunk_id: str) -> str | None:
    """The content digest a chunk's id carries; None for an id without one (a chunk of an earlier release)."""
    found = _CHUNK_VERSION.search(chunk_id)
    return found.group(1) if found else None


def record_citations(s: Session, job_id: uuid.UUID, cited: Iterable[Cited]) -> None:
    """The job's cited documents, in the caller's transaction; each one already changed or deleted since the answer
    read it is marked so at once."""
    rows = {(c.collection_id, c.document_id): c for c in cited}
    # A step run again (a worker lost after the job's end was written) records nothing twice.
    recorded = set(s.execute(select(JobCitationRow.collection_id, JobCitationRow.document_id)
                             .where(JobCitationRow.job_id == job_id)).tuples())
    rows = {key: c for key, c in rows.items() if key not in recorded}
    if not rows:
        return
    current = _current_versions(s, rows)
    now = utcnow()
    for key, c in rows.items():
        stale = _staleness(c.version, current.get(key, _GONE))
        s.add(JobCitationRow(job_id=job_id, collection_id=c.collection_id, document_id=c.document_id,
                             version=c.version, stale=stale, stale_at=now if stale else None))
    s.flush()


_GONE = object()


def _staleness(read: str | None, now: object) -> Staleness | None:
    if now is _GONE:
        return "deleted"
    # A document indexed before versions were kept (None) cannot be told changed: it is taken as the one read.
    return "changed" if read is not None and now is not None and now != read else None


def _current_versions(s: Session, cited: Mapping[tuple[uuid.UUID, str], Cited]) -> dict[tuple[uuid.UUID, str],
                                                                                      str | None]:
    by_collection: dict[uuid.UUID, list[str]] = {}
    for collection_id, document_id in cited:
        by_collection.setdefault(collection_id, []).append(document_id)
    found: dict[tuple[uuid.UUID, str], str | None] = {}
    for collection_id, ids in by_collection.items():
        rows = s.execute(select(DocumentRow.external_id, DocumentRow.version)
                         .where(DocumentRow.collection_id == collection_id, DocumentRow.external_id.in_(ids)))
        found.update(((collection_id, external_id), version) for external_id, version in rows)
    return found


def mark_changed(s: Session, collection_id: uuid.UUID, versions: Mapping[str, str]) -> int:
    """Every answer citing one of these documents at another version than the one it is now indexed at is marked
    ``changed`` (one already marked keeps its first mark); how many citations were marked."""
    marked = 0
    now = utcnow()
    for document_id, version in versions.items():
        result = s.execute(
            update(JobCitationRow)
            .where(JobCitationRow.collection_id == collection_id, JobCitationRow.document_id == document_id,
                   JobCitationRow.stale.is_(None), JobCitationRow.version.is_not(None),
                   JobCitationRow.version != version)
            .values(stale="changed", stale_at=now)
            .execution_options(synchronize_session=False))
        marked += int(getattr(result, "rowcount", 0) or 0)
    return marked


def mark_deleted(s: Session, collection_id: uuid.UUID, document_id: str) -> int:
    """Every answer citing the document is marked ``deleted`` (over a ``changed`` mark too: it is gone now); how
    many citations were marked. A mark already announced is announced no second time (one ``job.stale`` a job)."""
    result = s.execute(
        update(JobCitationRow)
        .where(JobCitationRow.collection_id == collection_id, JobCitationRow.document_id == document_id,
               or_(JobCitationRow.stale.is_(None), JobCitationRow.stale != "deleted"))
        .values(stale="deleted", stale_at=utcnow())
        .execution_options(synchronize_session=False))
    return int(getattr(result, "rowcount", 0) or 0)


def stale_marks(s: Session, job_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, dict[str, str]]:
    """Each job's stale marks, ``{document_id: "changed" | "deleted"}`` (a job answered from the cache shows those
    of the job it copies); a job with none is left out."""
    ids = list(job_ids)
    if not ids:
        return {}
    source = dict(s.execute(select(JobRow.id, JobRow.cached_from).where(JobRow.id.in_(ids))).all())
    owner = {job_id: source.get(job_id) or job_id for job_id in ids}
    marks: dict[uuid.UUID, dict[str, str]] = {}
    rows = s.execute(select(JobCitationRow.job_id, JobCitationRow.document_id, JobCitationRow.stale)
                     .where(JobCitationRow.job_id.in_(set(owner.values())), JobCitationRow.stale.is_not(None)))
    for job_id, document_id, stale in rows:
        marks.setdefault(job_id, {})[document_id] = str(stale)
    return {job_id: marks[by] for job_id, by in owner.items() if by in marks}


def has_stale_citation(job_id: ColumnElement[uuid.UUID] | InstrumentedAttribute[uuid.UUID]) -> ColumnElement[bool]:
    """SQL: the job of this id cites a document that changed or was deleted since (the whole-job cache's lookup
    skips such a job: its answer is never served again)."""
    return exists().where(JobCitationRow.job_id == job_id, JobCitationRow.stale.is_not(None))
