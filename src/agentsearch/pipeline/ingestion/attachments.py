"""The documents a parsed file's attachments become, and the ones refused, each named in the file's notes.

An attachment of document ``<parent id>`` is the document ``<parent id>/<its name without the extension>``,
parsed next by a task of its own; it takes its parent's document groups (whoever finds an e-mail finds what it
carries). Each is held to the rules an upload of it as a file would be, at the time it is made:

- **Replacing.** An existing document of its id is replaced only when the file's sender finds it: one restricted to
  groups the sender is not in is refused with the upload routes' own 409 (``document_access.refuse_hidden``), and
  stays untouched. The sender is recorded with the file it sent (``documents.upload_state``) and handed down the
  tree.
- **Untouched until read.** A document an attachment replaces keeps its title, metadata, groups and text until the
  attachment is read: a failed reading leaves it as it was (``failed``, with the reason). Its new ones wait in the
  file's state (``then``) and are written with its text (``take_over``).
- **The quota.** A new document counts against the collection owner's document quota
  (``quotas.check_document_quota``, the routes' 413), checked as each is made.
- **One upload.** One uploaded file becomes at most ``max_documents_per_upload`` documents with its attachments,
  however deeply nested. The limit is handed down the tree as a budget (``documents_left``): an attachment that may
  carry attachments of its own (an e-mail) gets an even share of what its parent's budget has left, so the whole
  tree stays within it whatever order its files are read in, with no count shared between tasks.

Usage::

    keep_file(s, row, "hr.eml", "eml", data, upload_state(user_id))     # the API, for an uploaded file
    made = store_attachments(s, parent, parsed.attachments, state, settings)   # [(row id, task id)] to parse next
    take_over(s, row, state)                                              # once the attachment's text is read
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from agentsearch.pipeline.ingestion.documents import keep_file, upload_state
from agentsearch.pipeline.ingestion.lease import queue
from agentsearch.pipeline.parsing import Attachment, ParseRefused, sniff
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.collections import CollectionRow, DocumentRow
from agentsearch.pipeline.refusal import Refusal
from agentsearch.pipeline.security.document_access import (
    document_groups,
    held_tokens,
    refuse_hidden,
    set_document_groups,
)
from agentsearch.pipeline.security.quotas import Limits, check_document_quota, overrides_of

# The formats whose files carry attachments of their own: only these get a share of their parent's budget (a PDF's
# share would be lost to the e-mails beside it). A format missing here stores none of its attachments: safe.
CONTAINER_FORMATS = frozenset({"eml"})
MAX_ID_CHARS = 400


@dataclass
class _Taken:
    row: DocumentRow
    attachment: Attachment
    format: str
    task_id: str
    then: dict[str, Any] | None


def store_attachments(s: Session, parent: DocumentRow, attachments: list[Attachment], state: dict[str, Any],
                      settings: Settings) -> list[tuple[str, str]]:
    """Each attachment a document of its own, or refused with the reason in ``parent.notes``: the ids of the rows
    made, each with the id of the task that parses it (sent once the session commits). ``state``: the parent file's
    reading state (its sender, what its tree may still become)."""
    if not attachments:
        return []
    collection = s.get(CollectionRow, parent.collection_id)
    assert collection is not None
    groups = document_groups(s, [parent.id]).get(parent.id)
    uploader = state.get("uploader")
    # An unknown sender (a file queued before senders were recorded) replaces no restricted document.
    tokens = held_tokens(s, uploader) if uploader else frozenset()
    left = _documents_left(state, settings)
    quota = Limits.defaults(settings).overlaid(overrides_of(s, collection.user_id)).max_documents
    taken: list[_Taken] = []
    for attachment in attachments:
        try:
            file_format = sniff(attachment.data, attachment.name)
        except ParseRefused as exc:
            _refused(parent, attachment, str(exc))
            continue
        if file_format == "jsonl":
            file_format = "text"  # an attachment is one document, whatever its lines look like
        if len(taken) >= left:
            _refused(parent, attachment, f"one uploaded file becomes at most {settings.max_documents_per_upload} "
                                         "documents with its attachments (AGENTSEARCH_MAX_DOCUMENTS_PER_UPLOAD)")
            continue
        external_id = f"{parent.external_id}/{PurePath(attachment.name).stem}"[:MAX_ID_CHARS]
        if any(t.row.external_id == external_id for t in taken):
            _refused(parent, attachment, f"document id {external_id!r} is another attachment's (the same name "
                                         "without its extension)")
            continue
        row = s.scalar(select(DocumentRow).where(DocumentRow.collection_id == parent.collection_id,
                                                 DocumentRow.external_id == external_id))
        try:
            if row is not None:
                refuse_hidden(s, [row], collection, tokens)
            else:
                check_document_quota(s, collection.user_id, adding=1, limit=quota)
        except Refusal as exc:
            _refused(parent, attachment, f"{exc.status} {exc.detail}")
            continue
        title, metadata = PurePath(attachment.name).stem, {"attached_to": parent.external_id}
        then = None
        if row is None:
            row = DocumentRow(collection_id=parent.collection_id, external_id=external_id, text="", title=title,
                              metadata_=metadata)
            s.add(row)
        else:
            then = {"title": title, "metadata": metadata, "groups": groups}
        task_id = str(uuid.uuid4())
        queue(row, task_id)
        s.flush()
        if then is None:
            set_document_groups(s, row, collection, groups)
        taken.append(_Taken(row, attachment, file_format, task_id, then))
    shares = _shares(left - len(taken), [t.format in CONTAINER_FORMATS for t in taken])
    for item, share in zip(taken, shares, strict=True):
        child = {**upload_state(uuid.UUID(uploader) if uploader else None), "documents_left": share}
        if item.then is not None:
            child["then"] = item.then
        keep_file(s, item.row, item.attachment.name, item.format, item.attachment.data, child)
    return [(str(t.row.id), t.task_id) for t in taken]


def take_over(s: Session, row: DocumentRow, state: dict[str, Any]) -> None:
    """Give a document an attachment replaced the attachment's title, metadata and groups, now that its text is
    read (before it, a failed reading would have changed who finds the old text). Nothing for a new document."""
    then = state.get("then")
    if then is None:
        return
    collection = s.get(CollectionRow, row.collection_id)
    assert collection is not None
    row.title, row.metadata_ = then["title"], dict(then["metadata"])
    set_document_groups(s, row, collection, then["groups"])


def _documents_left(state: dict[str, Any], settings: Settings) -> int:
    """How many documents the file's attachments may still become: its share, or for an uploaded file the limit
    less itself."""
    left = state.get("documents_left")
    return max(0, int(left)) if left is not None else settings.max_documents_per_upload - 1


def _shares(rest: int, containers: list[bool]) -> list[int]:
    """``rest`` split evenly among the containers, the earlier ones taking the remainder; 0 for the others."""
    count = sum(containers)
    if not count or rest <= 0:
        return [0] * len(containers)
    each, extra = divmod(rest, count)
    shares, index = [], 0
    for container in containers:
        shares.append(each + (index < extra) if container else 0)
        index += container
    return shares


def _refused(parent: DocumentRow, attachment: Attachment, reason: str) -> None:
    parent.notes = [*(parent.notes or []), f"attachment {attachment.name}: refused: {reason}"]
