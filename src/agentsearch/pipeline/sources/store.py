"""The sources table and its runs: a source made, changed and removed with its config checked by its kind, its
credentials sealed, its runs queued, claimed when due, and held by a lease so that two never overlap.

Usage::

    with db.session() as s:
        row = create_source(s, settings, collection, user_id, "web", {"url": "https://example.org/"}, 3600, True)
        shown(row)                           # the config with each credential as "set"
        run = new_run(s, row, "manual")      # queued: a worker's task runs it (agentsearch.pipeline.sources.run)
    due = claim_due(db)                      # [(source id, run id)] of the sources whose time has come
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

from pydantic import SecretStr, ValidationError
from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from agentsearch.pipeline.platform.db import Database, utcnow
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.sources import SourceRow, SourceRunRow
from agentsearch.pipeline.refusal import Refusal, invalid, invalid_fields
from agentsearch.pipeline.sources.credentials import box_or_refuse
from agentsearch.pipeline.sources.kinds import KINDS, kind_named
from agentsearch.pipeline.sources.kinds.base import SourceConfig, SourceKind

SHOWN_SET = "set"
LOST = "the run was lost: its worker stopped before it ended"


def checked_config(settings: Settings, kind_name: str, config: dict[str, Any]) -> tuple[SourceKind, SourceConfig]:
    """The kind and its config, or 422 naming the kind or the config's field at fault."""
    kind = kind_named(kind_name)
    if kind is None:
        raise invalid(("body", "kind"), f"no kind of source {kind_name!r}; kinds: {', '.join(sorted(KINDS))}")
    try:
        return kind, kind.config_model.model_validate(config)
    except ValidationError as exc:
        raise invalid_fields(("body", "config"), exc) from None


def checked_groups(collection: CollectionRow | None, config: SourceConfig) -> None:
    """A mapping to document groups needs a team collection: a personal one has no groups (422 naming the field)."""
    if (getattr(config, "groups", None) or getattr(config, "groups_required", False)) and (
            collection is None or collection.team_id is None):
        raise invalid(("body", "config", "groups"), "document groups restrict a team collection's documents; this "
                                                    "collection is personal")


def checked_schedule(settings: Settings, schedule_s: int | None) -> int | None:
    if schedule_s is not None and schedule_s < settings.sources_min_schedule_s:
        raise invalid(("body", "schedule_s"), f"schedule_s must be at least {settings.sources_min_schedule_s} "
                                              "seconds (or null: runs only when asked)")
    return schedule_s


def _seal(settings: Settings, row: SourceRow, config: SourceConfig) -> None:
    """The config's plain fields in ``config``, its credentials sealed in ``credentials``."""
    secret_names = config.secret_fields()
    row.config = config.model_dump(mode="json", exclude=set(secret_names))
    secrets = {n: v.get_secret_value() for n in secret_names if isinstance(v := getattr(config, n), SecretStr)}
    # The names of the credentials set stand before the token: what a listing shows as "set" without the key.
    row.credentials = f"{','.join(secrets)}|{box_or_refuse(settings).seal(secrets)}" if secrets else None


def create_source(s: Session, settings: Settings, collection: CollectionRow, user_id: uuid.UUID, kind_name: str,
                  config: dict[str, Any], schedule_s: int | None, enabled: bool) -> SourceRow:
    kind, checked = checked_config(settings, kind_name, config)
    checked_groups(collection, checked)
    row = SourceRow(collection_id=collection.id, user_id=user_id, kind=kind.name, enabled=enabled, state={},
                    schedule_s=checked_schedule(settings, schedule_s))
    _seal(settings, row, checked)
    row.next_run_at = utcnow() + timedelta(seconds=schedule_s) if schedule_s else None
    s.add(row)
    s.flush()
    return row


def credentials_of(settings: Settings, row: SourceRow) -> dict[str, Any]:
    if row.credentials is None:
        return {}
    return box_or_refuse(settings).open(row.credentials.partition("|")[2])


def update_source(s: Session, settings: Settings, row: SourceRow, changes: dict[str, Any]) -> SourceRow:
    """``changes``: any of ``config`` (merged over the stored one: a credential left out is kept), ``schedule_s``,
    ``enabled``."""
    if "config" in changes:
        merged = {**row.config, **credentials_of(settings, row), **(changes["config"] or {})}
        _, checked = checked_config(settings, row.kind, merged)
        checked_groups(s.get(CollectionRow, row.collection_id), checked)
        _seal(settings, row, checked)
    if "schedule_s" in changes:
        row.schedule_s = checked_schedule(settings, changes["schedule_s"])
        row.next_run_at = utcnow() + timedelta(seconds=row.schedule_s) if row.schedule_s else None
    if changes.get("enabled") is not None:
        row.enabled = bool(changes["enabled"])
    s.flush()
    return row


def source_of(s: Session, collection_id: uuid.UUID, source_id: uuid.UUID, lock: bool = False) -> SourceRow:
    query = select(SourceRow).where(SourceRow.id == source_id, SourceRow.collection_id == collection_id)
    row = s.scalars(query.with_for_update() if lock else query).first()
    if row is None:
        raise Refusal(404, f"source {source_id} not found")
    return row


def sources_of(s: Session, collection_id: uuid.UUID) -> list[SourceRow]:
    return list(s.scalars(select(SourceRow).where(SourceRow.collection_id == collection_id)
                          .order_by(SourceRow.created_at)))


def document_ids(row: SourceRow) -> list[str]:
    return [entry["document_id"] for entry in (row.state or {}).get("items", {}).values()
            if entry.get("document_id")]


def new_run(s: Session, row: SourceRow, trigger: str) -> SourceRunRow:
    run = SourceRunRow(source_id=row.id, trigger=trigger, status="queued", errors=[])
    s.add(run)
    s.flush()
    return run


def runs_of(s: Session, source_id: uuid.UUID, limit: int = 20) -> list[SourceRunRow]:
    return list(s.scalars(select(SourceRunRow).where(SourceRunRow.source_id == source_id)
                          .order_by(SourceRunRow.created_at.desc()).limit(limit)))


def claim_due(db: Database, now: datetime | None = None) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """A queued run for each enabled, scheduled source whose time has come; its next time moved on first."""
    now = now or utcnow()
    with db.session() as s:
        rows = s.scalars(select(SourceRow).where(SourceRow.enabled, SourceRow.schedule_s.is_not(None),
                                                 SourceRow.next_run_at <= now).with_for_update(skip_locked=True)).all()
        due = []
        for row in rows:
            row.next_run_at = now + timedelta(seconds=row.schedule_s or 0)
            due.append((row.id, new_run(s, row, "schedule").id))
        return due


def take_lease(s: Session, source_id: uuid.UUID, run_id: uuid.UUID, lease_s: float) -> bool:
    """The source held by this run until it ends or ``lease_s`` passes: False while another run holds it. One
    conditional UPDATE, so of two runs asking at once one gets it."""
    now = utcnow()
    taken = s.execute(update(SourceRow).where(SourceRow.id == source_id,
                                              or_(SourceRow.lease_until.is_(None), SourceRow.lease_until < now))
                      .values(lease_until=now + timedelta(seconds=lease_s), lease_run_id=run_id))
    if taken.rowcount != 1:  # type: ignore[attr-defined]
        return False
    # A run that held it before and never ended (its worker killed) is said to be lost.
    s.execute(update(SourceRunRow).where(SourceRunRow.source_id == source_id, SourceRunRow.status == "running",
                                         SourceRunRow.id != run_id)
              .values(status="failed", finished_at=now, errors=[LOST]))
    return True


def release_lease(s: Session, source_id: uuid.UUID, run_id: uuid.UUID) -> None:
    s.execute(update(SourceRow).where(SourceRow.id == source_id, SourceRow.lease_run_id == run_id)
              .values(lease_until=None, lease_run_id=None))


def shown_run(run: SourceRunRow) -> dict[str, Any]:
    return {"id": str(run.id), "source_id": str(run.source_id), "trigger": run.trigger, "status": run.status,
            "created_at": run.created_at, "started_at": run.started_at, "finished_at": run.finished_at,
            "documents": {"new": run.new, "changed": run.changed, "unchanged": run.unchanged,
                          "removed": run.removed, "failed": run.failed},
            "errors": run.errors or []}


def shown(row: SourceRow, last_run: SourceRunRow | None = None) -> dict[str, Any]:
    """A source as the API and the command line give it: each credential ``"set"`` when it is, never its value."""
    kind = kind_named(row.kind)
    secret_names = kind.config_model.secret_fields() if kind is not None else []
    sealed = set(row.credentials.partition("|")[0].split(",")) if row.credentials else set()
    config = {**row.config, **{n: (SHOWN_SET if n in sealed else None) for n in secret_names}}
    return {"id": str(row.id), "collection_id": str(row.collection_id), "kind": row.kind, "config": config,
            "schedule_s": row.schedule_s, "enabled": row.enabled, "next_run_at": row.next_run_at,
            "created_at": row.created_at, "updated_at": row.updated_at,
            "items": len((row.state or {}).get("items", {})),
            "last_run": shown_run(last_run) if last_run is not None else None}
