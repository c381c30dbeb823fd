"""A file as documents: a JSON Lines file's lines, or any other file the parsers read (``agentsearch.pipeline.parsing``)
as one document, the text of its parts joined with where each part stands in it.

Usage::

    docs = read_documents(Path("corpus.jsonl"))            # JSON Lines; a bad line raises with its number
    stored = read_file_document(Path("deck.pptx"), "pptx", ParseLimits())   # text, parts with their locations
    document = file_document(parsed, "deck.pptx", "pptx")   # a ParsedFile read elsewhere (a window at a time)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from agentsearch.pipeline.ingestion.documents_in import MAX_DOCUMENT_CHARS, DocumentIn, IngestError, parse_jsonl
from agentsearch.pipeline.parsing import ParsedFile, ParseLimits, ParseRefused, read_file, sniff
from agentsearch.pipeline.parsing.sandbox import Progress
from agentsearch.pipeline.platform.settings import get_settings
from agentsearch.pipeline.security.storable import text_problem


def read_documents(path: Path, limits: ParseLimits | None = None) -> list[DocumentIn]:
    """JSON Lines (one document per line), or any other file the parsers read (``agentsearch.pipeline.parsing``) as one
    document, its id the file's name without the extension. A file is read within ``limits`` (default: the
    settings') and refused by name past them or when it cannot be read."""
    data = path.read_bytes()
    try:
        file_format = sniff(data, path.name)
    except ParseRefused as exc:
        raise IngestError(f"{path.name}: {exc}") from None
    if file_format == "jsonl":
        text = data.decode("utf-8")
        if problem := text_problem(text):
            raise IngestError(f"{path.name}: the text {problem}")
        return parse_jsonl(text)
    stored = read_file_document(path, file_format, limits or ParseLimits.from_settings(get_settings()))
    return [DocumentIn(id=path.stem, title=stored.title, text=stored.text, metadata=stored.metadata)]


@dataclass
class FileDocument:
    """A parsed file as the service stores it: the text of its parts joined, and where each part stands in it
    (``parts``: ``{"start", "end", "location"}``, offsets into ``text``), with what the reading noted."""

    title: str
    text: str
    metadata: dict[str, Any]
    parts: list[dict[str, Any]]
    notes: list[str]


def read_file_document(path: Path, file_format: str, limits: ParseLimits, on_progress: Progress | None = None,
                       name: str | None = None) -> FileDocument:
    """The file at ``path`` read as ``file_format`` in the parsing child process, as one document; ``name`` is what
    its sender called it (default: the path's name)."""
    name = name or path.name
    try:
        parsed = read_file(path, file_format, limits, on_progress)
    except ParseRefused as exc:
        raise IngestError(f"{name}: {exc}") from None
    return file_document(parsed, name, parsed.format or file_format)


def file_document(parsed: ParsedFile, name: str, file_format: str) -> FileDocument:
    """Join the parts of a parsed file into one text with their offsets. Characters no database can keep (NUL,
    other control characters, lone surrogates: what a PDF font without a character map gives) are left out and
    counted in the notes, so three unreadable characters never cost a whole document."""
    pieces: list[str] = []
    parts: list[dict[str, Any]] = []
    notes = list(parsed.notes)
    dropped = 0
    offset = 0
    for part in parsed.parts:
        text, removed = _keepable(part.text)
        dropped += removed
        text = text.strip()
        if not text:
            continue
        if pieces:
            offset += len(PART_SEPARATOR)
        pieces.append(text)
        parts.append({"start": offset, "end": offset + len(text), "location": dict(part.location)})
        offset += len(text)
    if dropped:
        notes.append("1 character that could not be read was left out" if dropped == 1 else
                     f"{dropped} characters that could not be read were left out")
    text = PART_SEPARATOR.join(pieces)
    if not text:
        raise IngestError(f"{name}: no text could be read from the file" + (f" ({'; '.join(notes)})" if notes else ""))
    if len(text) > MAX_DOCUMENT_CHARS:
        raise IngestError(f"{name}: the text read is longer than {MAX_DOCUMENT_CHARS:,} characters; split the file")
    metadata: dict[str, Any] = {"source": name, "format": file_format}
    if parsed.pages is not None:
        metadata["pages"] = parsed.pages
    title = _keepable((parsed.title or "").strip())[0][:2000] or PurePath(name).stem
    return FileDocument(title=title, text=text, metadata=metadata, parts=parts, notes=notes)


PART_SEPARATOR = "\n\n"
# Control characters but tab, newline and carriage return; lone surrogates. None can be stored as text.
_UNKEEPABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff\ud800-\udfff]")


def _keepable(text: str) -> tuple[str, int]:
    kept, removed = _UNKEEPABLE.subn("", text)
    return kept, removed
