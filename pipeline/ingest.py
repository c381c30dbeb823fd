"""Ingestion: documents from JSON Lines or from files the parsers read (``pipeline.parsing``), cut into
sentence-aligned chunks that follow the file's parts, embedded (with their sentences) and indexed in Milvus.

Usage::

    docs = read_documents(Path("corpus.jsonl"))            # JSON Lines; a bad line raises with its number
    stored = read_file_document(Path("deck.pptx"), "pptx", ParseLimits())   # text, parts with their locations
    pieces = chunk_text("long text ...", max_chars=1000, overlap_chars=200)
    chunk_parts(stored.text, stored.parts)                  # [("Q4 revenue ...", {"slide": 2}), ...]
    chunks = index_documents([(doc.id, doc.title, doc.text, doc.metadata)], embedder.embed, KeywordAnalyzer(),
                             parts={doc.id: stored.parts})
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from pipeline.parsing import ParsedFile, ParseLimits, ParseRefused, read_file, sniff
from pipeline.parsing.sandbox import Progress
from pipeline.platform.settings import get_settings
from pipeline.retrieval.analyzer import KeywordAnalyzer, bm25_text, known_language, normalise_code
from pipeline.retrieval.sentence_vectors import chunk_units, pack
from pipeline.retrieval.vector_store import IndexedChunk
from pipeline.security.document_access import DocumentAccess, reserved_key_problem
from pipeline.security.storable import NotStorable, loads_checked, text_problem
from pipeline.text import split_sentences, whole_sentences

MAX_DOCUMENT_CHARS = 1_000_000
# Texts, and for each its (start, end) character spans -> the texts' vectors and the spans' (None: not read).
SpanEmbed = Callable[[list[str], list[list[tuple[int, int]]]],
                     tuple[list[list[float]], list[list[list[float] | None]]]]


class DocumentIn(BaseModel):
    id: str = Field(min_length=1, max_length=400)
    title: str = Field("", max_length=2000)
    text: str = Field(min_length=1, max_length=MAX_DOCUMENT_CHARS)
    metadata: dict[str, Any] = Field(default_factory=dict)
    access: DocumentAccess | None = Field(None, description='Who finds it in a team collection: {"groups": [...]}, '
                                                            "members of any of them (none: every member).")

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) else value

    @field_validator("metadata")
    @classmethod
    def _no_reserved_key(cls, value: dict[str, Any]) -> dict[str, Any]:
        problem = reserved_key_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("text must not be blank")
        return value


class IngestError(ValueError):
    pass


def parse_jsonl(text: str) -> list[DocumentIn]:
    """Every line checked as the API checks a document, before anything is sent: a file with a bad line anywhere
    is refused whole (with that line's number), so nothing of it is ingested and the fixed file can be sent again."""
    docs: list[DocumentIn] = []
    first_line: dict[str, int] = {}
    # split("\n"), not splitlines(): JSON strings may hold U+2028 and friends, which splitlines() breaks on.
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        try:
            doc = DocumentIn.model_validate(loads_checked(line))
        except json.JSONDecodeError as exc:
            raise IngestError(f"line {number}: not valid JSON ({exc.msg})") from None
        except NotStorable as exc:
            raise IngestError(f"line {number}: {exc}") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "document"
            raise IngestError(f"line {number}: {where}: {first['msg']}") from None
        # One request refuses a repeated id; a file sent in several requests must not let the later copy win.
        if doc.id in first_line:
            raise IngestError(f"line {number}: id {doc.id!r} repeats line {first_line[doc.id]}")
        first_line[doc.id] = number
        docs.append(doc)
    if not docs:
        raise IngestError("no documents found")
    return docs


def chunk_text(text: str, max_chars: int = 1000, overlap_chars: int = 200) -> list[str]:
    """Pack whole sentences into chunks of at most ``max_chars``; each chunk repeats up to ``overlap_chars`` of the
    previous chunk's last sentences, so a fact spanning a boundary is whole in one of them. A sentence longer than
    ``max_chars`` becomes its own chunk."""
    sentences = split_sentences(text) or [text.strip()]
    chunks: list[str] = []
    current: list[str] = []
    for sentence in sentences:
        if current and len(" ".join(current)) + 1 + len(sentence) > max_chars:
            chunks.append(" ".join(current))
            carry: list[str] = []
            for previous in reversed(current):
                if len(" ".join([previous, *carry])) > overlap_chars:
                    break
                carry.insert(0, previous)
            current = carry if len(" ".join([*carry, sentence])) <= max_chars else []
        current.append(sentence)
    if current:
        chunks.append(" ".join(current))
    return chunks


def read_documents(path: Path, limits: ParseLimits | None = None) -> list[DocumentIn]:
    """JSON Lines (one document per line), or any other file the parsers read (``pipeline.parsing``) as one
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


@dataclass
class ChunkingConfig:
    max_chars: int = 1000
    overlap_chars: int = 200
    # Large groups: the model sorts a call's texts by length, so bigger calls waste less on padding.
    embed_batch: int = 512
    # Each chunk's sentences embedded too and stored with it (pipeline.retrieval.sentence_vectors): ingestion does
    # about twice the model's work so that a job's reranker and answer need none of it.
    sentence_vectors: bool = True


def chunk_parts(text: str, parts: list[dict[str, Any]] | None, max_chars: int = 1000,
                overlap_chars: int = 200) -> list[tuple[str, dict[str, Any]]]:
    """``(chunk, location)`` pairs of a document. Without parts (a document sent as text) the whole text is cut by
    ``chunk_text``. With parts (``FileDocument.parts``) a chunk never runs across two of them (a page, a slide, a
    section), so every chunk has one place; only the rows of one sheet are packed together, up to ``max_chars``,
    a chunk of several rows saying ``"rows": [first, last]``."""
    if not parts:
        return [(piece, {}) for piece in chunk_text(text, max_chars, overlap_chars)]
    chunks: list[tuple[str, dict[str, Any]]] = []
    rows: list[tuple[str, dict[str, Any]]] = []
    for part in parts:
        piece, location = text[part["start"]:part["end"]], part.get("location") or {}
        if "row" in location:
            if rows and rows[0][1].get("sheet") != location.get("sheet"):
                chunks.extend(_pack_rows(rows, max_chars, overlap_chars))
                rows = []
            rows.append((piece, location))
            continue
        chunks.extend(_pack_rows(rows, max_chars, overlap_chars))
        rows = []
        chunks.extend((p, location) for p in chunk_text(piece, max_chars, overlap_chars))
    chunks.extend(_pack_rows(rows, max_chars, overlap_chars))
    return chunks


def _pack_rows(rows: list[tuple[str, dict[str, Any]]], max_chars: int,
               overlap_chars: int) -> list[tuple[str, dict[str, Any]]]:
    """Consecutive rows of one sheet, one per line, as few chunks as fit; a row longer than a chunk is cut alone."""
    packed: list[tuple[str, dict[str, Any]]] = []
    current: list[tuple[str, dict[str, Any]]] = []

    def close() -> None:
        if not current:
            return
        first, last = current[0][1], current[-1][1]
        where = dict(first) if len(current) == 1 else {"sheet": first.get("sheet"), "rows": [first["row"], last["row"]]}
        packed.append(("\n".join(text for text, _ in current), where))
        current.clear()

    for text, location in rows:
        if len(text) > max_chars:
            close()
            packed.extend((p, location) for p in chunk_text(text, max_chars, overlap_chars))
            continue
        if current and sum(len(t) + 1 for t, _ in current) + len(text) > max_chars:
            close()
        current.append((text, location))
    close()
    return packed


def heading_of(title: str, location: dict[str, Any]) -> str:
    """What a chunk is about when read alone: its document's title and, for a section, its heading path. The
    chunk's vector and keywords are made of it and the chunk's text."""
    section = location.get("section")
    return f"{title} > {section}" if title and section else (section or title)


def index_documents(
    docs: list[tuple[str, str, str, dict[str, Any]]],
    embed: Callable[[list[str]], list[list[float]]],
    analyzer: KeywordAnalyzer,
    chunking: ChunkingConfig | None = None,
    parts: Mapping[str, list[dict[str, Any]]] | None = None,
    embed_spans: SpanEmbed | None = None,
) -> list[IndexedChunk]:
    """Chunk ``(document_id, title, text, metadata)`` tuples (a document with ``parts[document_id]`` along its
    parts, ``chunk_parts``) and embed every chunk, in batches across documents; with ``chunking.sentence_vectors``
    each chunk's sentences too (a sentence repeated in the overlap of two chunks, or in two documents of one call,
    is embedded once). With ``embed_spans`` (``Embedder.embed_spans``) a chunk's sentences are read from the
    chunk's own pass, and only those it cannot read so, and the titles, are embedded alone. A chunk's id carries a
    digest of its document's content (``document_id#digest-n``): a changed document's chunks are new rows beside
    the old ones until those are deleted, never a mix of both."""
    chunking = chunking or ChunkingConfig()
    parts = parts or {}
    pending: list[tuple[str, str, str, dict[str, Any], str, dict[str, Any]]] = []
    for document_id, title, text, metadata in docs:
        own_parts = parts.get(document_id)
        version = content_digest(title, text, own_parts)
        for i, (piece, location) in enumerate(chunk_parts(text, own_parts, chunking.max_chars,
                                                          chunking.overlap_chars)):
            pending.append((document_id, title, piece, metadata, f"{document_id}#{version}-{i}", location))
    chunks: list[IndexedChunk] = []
    read_in_chunk: list[dict[str, list[float]]] = []
    for start in range(0, len(pending), chunking.embed_batch):
        batch = pending[start : start + chunking.embed_batch]
        # The title (and a section's heading path) travels with each piece: it often carries the words a query uses.
        headings = [heading_of(title, location) for _, title, _, _, _, location in batch]
        texts = [f"{heading}. {piece}" if heading else piece
                 for heading, (_, _, piece, _, _, _) in zip(headings, batch, strict=True)]
        if embed_spans is not None and chunking.sentence_vectors:
            located = [sentence_spans(text, piece) for text, (_, _, piece, _, _, _) in zip(texts, batch, strict=True)]
            vectors, pooled = embed_spans(texts, [[span for _, span in own] for own in located])
            read_in_chunk.extend({sentence: vector for (sentence, _), vector in zip(own, vectors_of, strict=True)
                                  if vector is not None}
                                 for own, vectors_of in zip(located, pooled, strict=True))
        else:
            vectors = embed(texts)
        for heading, (document_id, title, piece, metadata, chunk_id, location), vector in zip(
                headings, batch, vectors, strict=True):
            language, keywords = chunk_keywords(analyzer, heading, piece, metadata)
            chunks.append(
                IndexedChunk(
                    id=chunk_id,
                    document_id=document_id,
                    title=title,
                    text=piece,
                    keywords=keywords,
                    vector=vector,
                    metadata={**metadata, "language": language, **({"location": location} if location else {})},
                )
            )
    if chunking.sentence_vectors:
        _add_sentence_vectors(chunks, embed, chunking.embed_batch, read_in_chunk or [{} for _ in chunks])
    return chunks


def span_reader(embedder: Any, late_chunking: bool) -> SpanEmbed | None:
    """What ``index_documents`` takes as ``embed_spans``: the embedder's, when it has one and the setting asks for
    it (``late_chunking``); None embeds every sentence alone."""
    return getattr(embedder, "embed_spans", None) if late_chunking else None


def sentence_spans(text: str, piece: str) -> list[tuple[str, tuple[int, int]]]:
    """The sentences of ``piece`` whose vectors are stored (``chunk_units`` but the title) with where each stands
    in ``text``, the chunk as embedded (its heading, then ``piece``). A sentence not found as written (one joined
    across a line break) is left out: it is embedded alone."""
    offset = len(text) - len(piece)
    spans: list[tuple[str, tuple[int, int]]] = []
    cursor = 0
    for sentence in whole_sentences(piece):
        at = piece.find(sentence, cursor)
        if not sentence.strip() or at < 0:
            continue
        spans.append((sentence, (offset + at, offset + at + len(sentence))))
        cursor = at + len(sentence)
    return spans


def content_digest(title: str, text: str, parts: list[dict[str, Any]] | None) -> str:
    """A short digest of what a document's chunks are made of."""
    material = json.dumps([title, text, parts or []], ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:10]


def chunk_keywords(analyzer: KeywordAnalyzer, title: str, piece: str, metadata: dict[str, Any]) -> tuple[str, str]:
    """``(language, analysed text)`` of one chunk. The language is the chunk's own (detected on its text, so a
    document that changes language changes it chunk by chunk), unless the document's metadata names one: the
    sender's word wins over a guess. It goes into the chunk's metadata, where filters and the search read it."""
    given = metadata.get("language")
    if isinstance(given, str) and known_language(code := normalise_code(given)):
        return code, bm25_text(analyzer.terms_as(code, f"{title} {piece}"))
    # Otherwise (none, or not a language an analyser knows) detected.
    language = analyzer.language_of(piece)
    return language, bm25_text(analyzer.terms_as(language, f"{title} {piece}"))


def _add_sentence_vectors(chunks: list[IndexedChunk], embed: Callable[[list[str]], list[list[float]]],
                          batch: int, read_in_chunk: list[dict[str, list[float]]]) -> None:
    """Each chunk's stored sentence vectors: those read in the chunk's pass, the rest (titles, sentences it could not
    read so) embedded alone, each distinct text once."""
    units = [chunk_units(c.title, c.text) for c in chunks]
    distinct = list(dict.fromkeys(u for own, read in zip(units, read_in_chunk, strict=True)
                                  for u in own if u not in read))
    vectors: dict[str, list[float]] = {}
    for start in range(0, len(distinct), batch):
        texts = distinct[start : start + batch]
        vectors.update(zip(texts, embed(texts), strict=True))
    for chunk, own, read in zip(chunks, units, read_in_chunk, strict=True):
        chunk.sentences = pack(own, [read.get(u) or vectors[u] for u in own])
