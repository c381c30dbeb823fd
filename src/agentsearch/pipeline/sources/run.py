"""One run of a source: its kind lists the items, the new and changed are handed to the ingestion, the documents
of items gone are removed, and the run records its counts and first errors.

The run holds its source's lease (``store.take_lease``): a second run asked meanwhile ends ``skipped``. The items
are handed on a batch at a time, each batch committed with the items' new versions before its tasks are sent
(``send``): a run killed mid-way leaves a lease that passes, and the next run resumes from what was recorded (the
items stored count unchanged), reading again only what this one had not stored.
A listing that fails (``ListingFailed``, or anything the kind raises) fails the run and removes nothing; the items
already handed on keep their new versions.

Usage::

    outcome = run_source(services.db, settings, run_id, send=lambda tasks: ...)   # {"status", "documents", ...}
"""

from __future__ import annotations

import copy
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentsearch.pipeline.platform.db import Database, utcnow
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.sources import SourceRow, SourceRunRow
from agentsearch.pipeline.refusal import Refusal
from agentsearch.pipeline.security.audit import Actor, record
from agentsearch.pipeline.sources.fetch import Fetcher
from agentsearch.pipeline.sources.ingest import Task, document_id, hand_on, regroup, remove
from agentsearch.pipeline.sources.kinds import kind_named
from agentsearch.pipeline.sources.kinds.base import Context, Item, ListingFailed
from agentsearch.pipeline.sources.store import credentials_of, release_lease, take_lease

log = logging.getLogger(__name__)
BATCH = 20
MAX_ERRORS = 10
SKIPPED = "another run of this source is under way"


@dataclass
class Tally:
    """A run's counts, its first errors, and the state it found."""

    previous: dict[str, dict[str, Any]]
    items: dict[str, dict[str, Any]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("new", "changed", "unchanged", "removed", "failed"), 0))
    errors: list[str] = field(default_factory=list)
    withheld: set[str] = field(default_factory=set)

    def fail(self, key: str, reason: str, withhold: bool = False) -> None:
        self.counts["failed"] += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(reason)
        # Its document stays, and is looked at again next run; unless it may not be indexed at all (its permissions
        # unknown): then it is left out, and removed as an item gone.
        if withhold:
            self.withheld.add(key)
        elif key in self.previous:
            self.items[key] = self.previous[key]


def run_source(db: Database, settings: Settings, run_id: uuid.UUID, send: Callable[[list[Task]], None]
               ) -> dict[str, Any]:
    with db.session() as s:
        run = s.get(SourceRunRow, run_id)
        if run is None or run.status != "queued":
            return {"status": "gone" if run is None else run.status}
        source_id = run.source_id
        if not take_lease(s, source_id, run_id, settings.sources_run_lease_s):
            run.status, run.finished_at, run.errors = "skipped", utcnow(), [SKIPPED]
            return {"status": "skipped"}
        run.status, run.started_at = "running", utcnow()
        source = s.get(SourceRow, source_id)
        assert source is not None
        try:
            kind, credentials = kind_named(source.kind), credentials_of(settings, source)
        except (ValueError, Refusal) as exc:  # no key, or not the key they were sealed with
            run.status, run.finished_at, run.errors = "failed", utcnow(), [str(exc)]
            release_lease(s, source_id, run_id)
            return {"status": "failed", "errors": run.errors}
        previous, cursor = dict(source.state.get("items", {})), dict(source.state.get("cursor", {}))
        started = copy.deepcopy(cursor)
        config_row = {**source.config, **credentials}
    assert kind is not None, f"no kind {source.kind}"
    tally, status = Tally(previous), "succeeded"
    auth = (config_row["username"], config_row.get("password") or "") if config_row.get("username") else None
    with Fetcher(settings.egress_policy(), settings.sources_max_item_bytes, settings.sources_fetch_timeout_s,
                 settings.sources_max_redirects, auth) as fetcher:
        ctx = Context(fetcher, previous, cursor, dict(credentials), settings.sources_max_item_bytes,
                      settings.sources_fetch_timeout_s)
        batch: list[Item] = []
        try:
            # A config stored by an earlier release that this one's model refuses fails the run, not the worker.
            for item in kind.items(kind.config_model.model_validate(config_row), ctx):
                if _sort(item, tally):
                    batch.append(item)
                if len(batch) >= BATCH:
                    _hand(db, settings, source_id, batch, tally, send)
            _hand(db, settings, source_id, batch, tally, send)
        except Exception as exc:  # noqa: BLE001 - whatever the listing raised fails the run, and removes nothing
            status = "failed"
            tally.errors.insert(0, str(exc) if isinstance(exc, ListingFailed) else f"{type(exc).__name__}: {exc}")
            tally.items = {**previous, **tally.items}
        if ctx.partial is not None and status == "succeeded":
            tally.errors.insert(0, ctx.partial)
            # What was not listed is kept, not removed; what may not be indexed is removed all the same.
            tally.items = {**{k: v for k, v in previous.items() if k not in tally.withheld}, **tally.items}
    # A failed run keeps the cursor it started from: a change feed's token, a commit or a folder's state that the
    # kind moved on before the run failed would otherwise skip, at the next run, what this one did not store.
    return _finish(db, source_id, run_id, kind.keeps_missing, status, tally, cursor if status == "succeeded" else
                   started, send)


def _sort(item: Item, tally: Tally) -> bool:
    """Counts an item unchanged or failed; True when its content is to be handed on (new or changed)."""
    if item.error is not None:
        tally.fail(item.key, item.error, item.withhold)
        return False
    before = tally.previous.get(item.key)
    if item.content is None or (before is not None and before.get("version") == item.version):
        if before is not None and before.get("groups") != item.groups:
            item.content = None  # its permissions changed, not its content: its groups are written, nothing read
            return True
        if before is not None:
            tally.counts["unchanged"] += 1
            tally.items[item.key] = {**before, "memo": item.memo or before.get("memo", {})}
        return False
    return True


def _hand(db: Database, settings: Settings, source_id: uuid.UUID, batch: list[Item], tally: Tally,
          send: Callable[[list[Task]], None]) -> None:
    if not batch:
        return
    with db.session() as s:
        source = s.get(SourceRow, source_id)
        assert source is not None
        # Permissions first: a document whose groups changed has them before any new content is stored.
        regrouped = regroup(s, settings, source, [i for i in batch if i.content is None], tally.previous)
        handed = hand_on(s, settings, source, [i for i in batch if i.content is not None])
        handed.tasks[:0] = regrouped.tasks
        handed.documents.update(regrouped.documents)
        handed.failed.update(regrouped.failed)
        stored = {}
        for item in batch:
            if item.key in handed.failed:
                tally.fail(item.key, handed.failed[item.key], item.withhold)
                continue
            tally.counts["changed" if item.key in tally.previous else "new"] += 1
            before = tally.previous.get(item.key, {}) if item.content is None else {}
            stored[item.key] = {**before, "version": item.version, "url": item.link,
                                "memo": item.memo or before.get("memo", {}), "document_id": handed.documents[item.key],
                                "groups": item.groups}
        tally.items.update(stored)
        # Recorded with the documents, in their transaction: a run killed after this batch leaves it stored, and the
        # next run finds these items at their new version.
        source.state = {**source.state, "items": {**source.state.get("items", {}), **stored}}
    send(handed.tasks)
    batch.clear()


def _finish(db: Database, source_id: uuid.UUID, run_id: uuid.UUID, keeps_missing: bool, status: str, tally: Tally,
            cursor: dict[str, Any], send: Callable[[list[Task]], None]) -> dict[str, Any]:
    gone = [key for key in tally.previous if key not in tally.items] if status == "succeeded" else []
    if keeps_missing:
        tally.items.update({key: tally.previous[key] for key in gone})
        tally.counts["unchanged"] += len(gone)
        gone = []
    tasks: list[Task] = []
    with db.session() as s:
        source = s.get(SourceRow, source_id)
        run = s.get(SourceRunRow, run_id)
        if source is None or run is None:
            return {"status": "gone"}  # removed while it ran
        removed = [tally.previous[k].get("document_id") or document_id(source_id, k) for k in gone]
        tasks = remove(s, source.collection_id, removed)
        tally.counts["removed"] = len(removed)
        source.state = {"items": tally.items, "cursor": cursor}
        run.status, run.finished_at, run.errors = status, utcnow(), tally.errors
        for name, value in tally.counts.items():
            setattr(run, name, value)
        release_lease(s, source_id, run_id)
        record(s, Actor(source.user_id, "source"), "source.run.end", collection_id=source.collection_id,
               target=("source", source_id), details={"run": str(run_id), "status": status, **tally.counts})
    send(tasks)
    log.info("source %s run %s %s: %s", source_id, run_id, status, tally.counts)
    return {"status": status, "documents": tally.counts, "errors": tally.errors}
