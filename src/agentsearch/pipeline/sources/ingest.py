"""A source's items handed to the ingestion uploads use: files stored ``pending`` for the parsing queue
(``agentsearch.pipeline.ingestion.uploads.store_upload``), text stored as documents sent as JSON are, each batch
counted against the collection owner's document quota; and the documents of items that are gone removed.

Each document is named by its source and item (``document_id``) and says where it came from in its metadata:
``source_id``, ``source_kind`` and ``source_url`` (the page, entry or file), which listings and citations show.
The tasks to send once the batch committed are returned as ``Task``s: the run's worker sends them.

Usage::

    with db.session() as s:
        handed, tasks = hand_on(s, settings, source, items)     # {key: document id} of those taken; failures too
    send(tasks)     # ("agentsearch.parse_document" | "agentsearch.ingest_documents", args, task_id)
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from agentsearch.pipeline.ingestion.documents import documents_by_id, remove_document
from agentsearch.pipeline.ingestion.documents_in import MAX_DOCUMENT_CHARS
from agentsearch.pipeline.ingestion.lease import queue_in_tasks
from agentsearch.pipeline.ingestion.uploads import StoredFile, store_upload
from agentsearch.pipeline.parsing import ParseRefused, sniff
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.collections import CollectionRow, DocumentRow
from agentsearch.pipeline.platform.tables.sources import SourceRow
from agentsearch.pipeline.refusal import Refusal
from agentsearch.pipeline.security.document_access import DocumentAccess, set_document_groups
from agentsearch.pipeline.security.quotas import Limits, check_document_quota, overrides_of
from agentsearch.pipeline.security.storable import text_problem
from agentsearch.pipeline.sources.kinds.base import Content, Item

PARSE, INDEX, DELETE = "agentsearch.parse_document", "agentsearch.ingest_documents", "agentsearch.delete_documents"
Task = tuple[str, tuple[Any, ...], str | None]  # a task's name, its arguments, its id (None: any)
MAX_ID_KEY = 300
MAX_ATTACHMENT_ROWS = 10_000


@dataclass
class Handed:
    """What a batch became: the document of each item taken, and the reason of each refused."""

    documents: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    tasks: list[Task] = field(default_factory=list)


def document_id(source_id: uuid.UUID, key: str) -> str:
    """The document an item is stored as: its source's and its own name, hashed when too long to be an id."""
    name = key if len(key) <= MAX_ID_KEY else hashlib.sha256(key.encode()).hexdigest()
    return f"source-{source_id.hex[:12]}:{name}"


def _metadata(source: SourceRow, item: Item) -> dict[str, Any]:
    # A kind's own fields never stand for the project's: its groups (``_access_groups``), format, origin.
    given = {k: v for k, v in (item.content.metadata if item.content is not None else {}).items()
             if not k.startswith(("_", "source")) and k != "format"}
    return {**given, "source_id": str(source.id), "source_kind": source.kind, "source_url": item.link}


def _text(content: Content) -> str:
    text = content.data.decode("utf-8")
    if not text.strip():
        raise ParseRefused("the file is empty")
    if problem := text_problem(text):
        raise ParseRefused(f"the text {problem}")
    if len(text) > MAX_DOCUMENT_CHARS:
        raise ParseRefused(f"{len(text)} characters, over the limit of {MAX_DOCUMENT_CHARS}")
    return text


def hand_on(s: Session, settings: Settings, source: SourceRow, items: list[Item]) -> Handed:
    """Store each item's content as its document, pending; one item refused (its format, its text) fails alone, a
    batch past the quota fails whole with the quota's reason."""
    handed = Handed()
    collection = s.get(CollectionRow, source.collection_id)
    assert collection is not None  # a source goes with its collection
    ids = {item.key: document_id(source.id, item.key) for item in items}
    existing = documents_by_id(s, collection.id, list(ids.values()))
    try:
        check_document_quota(s, collection.user_id, len(set(ids.values()) - set(existing)),
                             _max_documents(s, settings, collection.user_id))
    except Refusal as exc:
        handed.failed = {item.key: exc.detail for item in items}
        return handed
    texts: list[DocumentRow] = []
    for item in items:
        content, doc_id = item.content, ids[item.key]
        assert content is not None
        try:
            if content.as_text:
                row = existing.get(doc_id) or DocumentRow(collection_id=collection.id, external_id=doc_id)
                row.title, row.text = content.title or PurePosixPath(content.name).stem, _text(content)
                row.metadata_ = {**_metadata(source, item), "format": "text"}
                s.add(row)
                s.flush()
                set_document_groups(s, row, collection, item.groups)
                texts.append(row)
            else:
                stored = StoredFile(doc_id, content.name, sniff(content.data, content.name), content.data)
                access = DocumentAccess(groups=item.groups) if item.groups else None
                row_id, task_id = store_upload(s, collection, existing.get(doc_id), stored, source.user_id, access)
                stored_row = s.get(DocumentRow, row_id)
                assert stored_row is not None
                stored_row.metadata_ = {**stored_row.metadata_, **_metadata(source, item)}
                if content.title:
                    stored_row.title = content.title
                handed.tasks.append((PARSE, (str(collection.id), str(row_id)), task_id))
        except (ParseRefused, UnicodeDecodeError) as exc:
            handed.failed[item.key] = f"{item.link}: {exc}"
            continue
        except Refusal as exc:  # groups on a personal collection: refused when the source was made, kept safe here
            handed.failed[item.key] = f"{item.link}: {exc.detail}"
            continue
        handed.documents[item.key] = doc_id
    s.flush()
    for task_id, row_ids in queue_in_tasks(texts, settings.ingest_task_documents) if texts else []:
        handed.tasks.append((INDEX, (str(collection.id), row_ids), task_id))
    return handed


def _max_documents(s: Session, settings: Settings, user_id: uuid.UUID) -> int:
    return Limits.defaults(settings).overlaid(overrides_of(s, user_id)).max_documents


def regroup(s: Session, settings: Settings, source: SourceRow, items: list[Item],
            previous: dict[str, dict[str, Any]]) -> Handed:
    """The documents of items whose permissions changed in the source, not their content: their groups (and their
    attachments') written now, for listings and reads; an indexed one indexed again from its stored text, so its
    chunks carry them too (a document still waiting to be read takes them when it is)."""
    handed = Handed()
    if not items:
        return handed
    collection = s.get(CollectionRow, source.collection_id)
    assert collection is not None
    ids = {item.key: previous[item.key].get("document_id") or document_id(source.id, item.key) for item in items}
    rows = documents_by_id(s, collection.id, list(ids.values()))
    again: list[DocumentRow] = []
    for item in items:
        row = rows.get(ids[item.key])
        if row is None:
            handed.failed[item.key] = f"{item.link}: its document is gone; it is read again next run"
            continue
        try:
            for each in [row, *_attachments(s, collection.id, [row.external_id])]:
                set_document_groups(s, each, collection, item.groups)
                if each.status == "indexed":
                    again.append(each)
        except Refusal as exc:
            handed.failed[item.key] = f"{item.link}: {exc.detail}"
            continue
        handed.documents[item.key] = ids[item.key]
    s.flush()
    for task_id, row_ids in queue_in_tasks(again, settings.ingest_task_documents) if again else []:
        handed.tasks.append((INDEX, (str(collection.id), row_ids), task_id))
    return handed


def _attachments(s: Session, collection_id: uuid.UUID, parents: list[str]) -> list[DocumentRow]:
    """The documents the parents' attachments became, however deeply nested (an e-mail's, an attached e-mail's)."""
    found: list[DocumentRow] = []
    while parents:
        rows = list(s.scalars(select(DocumentRow).where(
            DocumentRow.collection_id == collection_id,
            DocumentRow.metadata_["attached_to"].as_string().in_(parents))))
        found.extend(rows)
        if len(found) >= MAX_ATTACHMENT_ROWS:
            break
        parents = [row.external_id for row in rows]
    return found


def remove(s: Session, collection_id: uuid.UUID, document_ids: list[str]) -> list[Task]:
    """The documents gone from the source removed, with the documents their attachments became (rows now,
    vectors by the task returned)."""
    if not document_ids:
        return []
    rows = list(documents_by_id(s, collection_id, document_ids).values())
    children = _attachments(s, collection_id, [row.external_id for row in rows])
    for row in rows + children:
        remove_document(s, row)
    return [(DELETE, (str(collection_id), document_ids + [row.external_id for row in children]), None)]
