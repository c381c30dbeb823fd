"""An uploaded file parsed, on the ingest queue (the body of ``agentsearch.worker.parsing.parse_document``): the API
stores the file and its document (``pending``); this reads it in the parsing child process
(``agentsearch.pipeline.parsing.read_file``), writes the document's text, parts and notes, and hands it to indexing. A
file that cannot be read ends its document ``failed`` with the reason.

A long paged file (a PDF, a multi-page TIFF) is read a window of pages at a time, each window a task of its own sent
to the back of the queue: a 200-page scan yields the worker after every window (about ``parse_window_s`` of work, a
setting), so the small files other users sent meanwhile are read in between instead of waiting for the whole scan.
The pages read so far wait in the file's row (``DocumentFile.parsed``) and show in the document's ``pages_done`` /
``pages_total``.

Every window ends within its reader's limits (``pdf_read_time_s`` of CPU, three times that of wall clock), so a
document ends ``indexed`` or ``failed`` within that bound per window. Each window claims the document as it starts
(``agentsearch.pipeline.ingestion.lease``) and names the task of the next one in its row: a pool process that dies
mid-window hands the message back and the window is read again, one lost attempt more; a whole worker that dies leaves
the message unacknowledged, and the reaper sends the window again (``agentsearch.worker.reaper.reap_documents``).

What is sent next (the next window, the attachments' parses, the indexing) is returned, for the task to send once
the rows naming those tasks are committed: this package knows no Celery.

Usage::

    outcome = parse_window(services, collection_id, document_id, start, Delivery(task_id, retries, node))
    outcome.answer        # {"status": "parsed" | "failed" | "window" | "gone", ...}
    outcome.parses        # [((collection_id, document_id[, start]), task_id), ...]: parse tasks to send
    outcome.index         # ((collection_id, [document_id]), task_id) or None: the indexing task to send
"""

from __future__ import annotations

import logging
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePath
from typing import Any

from agentsearch.pipeline.ingestion.attachments import store_attachments, take_over
from agentsearch.pipeline.ingestion.documents_in import IngestError
from agentsearch.pipeline.ingestion.files import file_document
from agentsearch.pipeline.ingestion.lease import Delivery, claim, finish, queue
from agentsearch.pipeline.parsing import ParsedFile, ParseLimits, ParseRefused, Part, read_file
from agentsearch.pipeline.parsing.file_names import bare_name
from agentsearch.pipeline.parsing.sandbox import Progress
from agentsearch.pipeline.platform.tables.collections import DocumentFileRow, DocumentRow
from agentsearch.pipeline.services import Services

log = logging.getLogger("agentsearch.worker")

# Formats read a window of pages at a time.
PAGED_FORMATS = ("pdf", "image")
# The first window is small, to learn the file's speed (a text page or a page for OCR); later windows are sized
# from the pages per second of the earlier ones to about ``parse_window_s`` of work.
FIRST_WINDOW_PAGES = 2
MAX_WINDOW_PAGES = 500
# Progress is written at most this often: a text PDF reads hundreds of pages a second.
PROGRESS_INTERVAL_S = 0.5

# A task's arguments and the id it is sent with.
Message = tuple[tuple[Any, ...], str]


@dataclass
class ParseOutcome:
    """What a parse task answers, and the tasks it sends next, in this order: ``parses`` (at the back of the
    queue, as new work), then ``index``."""

    answer: dict[str, Any]
    parses: list[Message] = field(default_factory=list)
    index: Message | None = None


def parse_window(services: Services, collection_id: str, document_id: str, start: int, delivery: Delivery,
                 retried: tuple[type[Exception], ...] = ()) -> ParseOutcome:
    """Read the next window of the document's file (from page ``start``), or the whole file when not paged.
    ``retried``: the errors the task's retries wait out (the database away during a progress write), raised as
    they are instead of failing the document."""
    row_id = uuid.UUID(document_id)
    with services.db.session() as s:
        row, upload = s.get(DocumentRow, row_id), s.get(DocumentFileRow, row_id)
        if row is None or upload is None or row.status != "pending":
            return ParseOutcome({"status": "gone"})  # deleted, replaced, or a redelivered message whose work is done
        state = dict(upload.parsed or {})
        if state.get("next", 0) != start:
            return ParseOutcome({"status": "gone"})  # a window sent twice: the first one moved on
        if not claim([row], delivery.task_id, delivery.retries, delivery.node,
                     services.settings.ingest_max_attempts):
            if row.status != "failed":
                return ParseOutcome({"status": "gone"})  # sent again with another task, which reads it
            s.delete(upload)  # its process died under it too often: nothing of the file stays
            return ParseOutcome({"status": "failed", "error": row.error})
        name, file_format, data = upload.name, upload.format, upload.data
    paged = file_format in PAGED_FORMATS
    # A window stops early past its share of work, however quick its first pages were (text, then scans).
    limits = replace(ParseLimits.from_settings(services.settings),
                     window_s=services.settings.parse_window_s if paged else 0)
    window = range(start, start + _window_pages(state, services.settings.parse_window_s)) if paged else None
    began = time.monotonic()
    try:
        parsed = _read(name, data, file_format, limits, _progress_writer(services, row_id), window)
    except ParseRefused as exc:
        return ParseOutcome(_fail(services, row_id, delivery.task_id, f"{name}: {exc}"))
    except retried:
        raise  # waited out by the task's retries (a progress write)
    except Exception as exc:  # the document ends with the reason, not pending until the reaper gives it up
        log.exception("document %s: parsing %s failed", row_id, name)
        return ParseOutcome(_fail(services, row_id, delivery.task_id, f"{name}: the file could not be parsed "
                                                                      f"({type(exc).__name__}: {exc})"[:1000]))
    file_format = parsed.format or file_format  # an Office file, told apart by its reader
    state = _merged(state, parsed, window, time.monotonic() - began)
    next_task = str(uuid.uuid4())
    if paged and state["next"] < (parsed.pages or 0):
        return _next_window(services, collection_id, document_id, delivery.task_id, state, parsed, next_task)
    return _parsed(services, collection_id, document_id, delivery.task_id, name, file_format, state, parsed,
                   next_task)


def _next_window(services: Services, collection_id: str, document_id: str, task_id: str, state: dict[str, Any],
                 parsed: ParsedFile, next_task: str) -> ParseOutcome:
    """The pages read so far kept in the file's row, and the next window's task named in the document's."""
    row_id = uuid.UUID(document_id)
    with services.db.session() as s:
        row, upload = s.get(DocumentRow, row_id), s.get(DocumentFileRow, row_id)
        if row is None or upload is None or row.task_id != task_id:
            return ParseOutcome({"status": "gone"})
        upload.parsed = state
        queue(row, next_task, fresh=False)
    # To the back of the queue, behind what other users sent meanwhile (as new work).
    return ParseOutcome({"status": "window", "pages_done": state["next"], "pages": parsed.pages},
                        parses=[((collection_id, document_id, state["next"]), next_task)])


def _parsed(services: Services, collection_id: str, document_id: str, task_id: str, name: str, file_format: str,
            state: dict[str, Any], parsed: ParsedFile, next_task: str) -> ParseOutcome:
    """The whole file read: the document's text, parts and notes written, its file dropped, its attachments made
    documents of their own, and its indexing named in its row."""
    row_id = uuid.UUID(document_id)
    whole = ParsedFile(title=state.get("title"), parts=[Part(p["text"], p["location"]) for p in state["parts"]],
                       pages=parsed.pages, notes=state["notes"])
    try:
        document = file_document(whole, name, file_format)
    except IngestError as exc:
        return ParseOutcome(_fail(services, row_id, task_id, str(exc)))
    with services.db.session() as s:
        row = s.get(DocumentRow, row_id)
        if row is None or row.task_id != task_id:
            return ParseOutcome({"status": "gone"})
        take_over(s, row, state)  # an attachment's replaced document changes only now that its text is read
        row.title = document.title if row.title in ("", PurePath(name).stem) else row.title
        row.text, row.parts, row.notes = document.text, document.parts, document.notes
        row.metadata_ = {**document.metadata, **(row.metadata_ or {}), "format": file_format}
        row.pages_done = row.pages_total = parsed.pages
        upload = s.get(DocumentFileRow, row_id)
        if upload is not None:
            s.delete(upload)
        queue(row, next_task, fresh=False)
        # Each attachment a document of its own, or refused with the reason in this one's notes.
        attached = store_attachments(s, row, parsed.attachments, state, services.settings)
    return ParseOutcome({"status": "parsed", "parts": len(document.parts), "attachments": len(attached)},
                        parses=[((collection_id, child_id), child_task) for child_id, child_task in attached],
                        index=((collection_id, [document_id]), next_task))


def _read(name: str, data: bytes, file_format: str, limits: ParseLimits, on_progress: Progress,
          window: range | None) -> ParsedFile:
    """The file read in the parsing child, from a folder of its own. The sender's name is no path: the file is
    written under its bare form (``bare_name``), which keeps the extension and the stem a CSV's sheet is named by."""
    with tempfile.TemporaryDirectory(prefix="agentsearch-parse-") as workdir:
        path = Path(workdir) / bare_name(name, "upload")
        path.write_bytes(data)
        return read_file(path, file_format, limits, on_progress, window)


def _window_pages(state: dict[str, Any], window_s: float) -> int:
    """Pages for about ``window_s`` of work, from the speed of the windows read so far."""
    rate = state.get("pages_per_s")
    if not rate:
        return FIRST_WINDOW_PAGES
    return max(1, min(MAX_WINDOW_PAGES, int(rate * window_s)))


def _merged(state: dict[str, Any], parsed: ParsedFile, window: range | None, seconds: float) -> dict[str, Any]:
    """The pages read so far with this window's added (up to where the reader stopped, when it stopped early); the
    rest of the state (the file's sender, what its attachments may become) as it was."""
    end = window.stop if window is not None and parsed.read_until is None else parsed.read_until or 0
    read = (min(end, parsed.pages or end) - window.start) if window is not None else 0
    return {
        **state,
        "title": state.get("title") or parsed.title,
        "parts": [*state.get("parts", []), *({"text": p.text, "location": p.location} for p in parsed.parts)],
        "notes": [*state.get("notes", []), *parsed.notes],
        "next": (window.start + read) if window is not None else 0,
        "pages_per_s": (read / seconds) if read and seconds > 0 else state.get("pages_per_s"),
    }


def _progress_writer(services: Services, row_id: uuid.UUID) -> Callable[[int, int], None]:
    last = [0.0]

    def write(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] < PROGRESS_INTERVAL_S and done < total:
            return
        last[0] = now
        with services.db.session() as s:
            row = s.get(DocumentRow, row_id)
            if row is not None:
                row.pages_done, row.pages_total = done, total

    return write


def _fail(services: Services, row_id: uuid.UUID, task_id: str, reason: str) -> dict[str, Any]:
    """Nothing of the file stays: its document is ``failed`` with the reason, and its bytes are dropped; unless the
    file was sent again meanwhile (another task carries it), whose newer bytes are read next."""
    log.info("document %s: %s", row_id, reason)
    with services.db.session() as s:
        if not finish(s, [row_id], task_id, "failed", reason):
            return {"status": "gone"}
        upload = s.get(DocumentFileRow, row_id)
        if upload is not None:
            s.delete(upload)
    return {"status": "failed", "error": reason}
