"""Ingestion: parse JSON Lines, cut documents into sentence-aligned chunks, embed them (and their sentences) and
index them in Milvus.

Usage::

    docs = read_documents(Path("corpus.jsonl"))            # .jsonl, .txt or .md; a bad line raises with its number
    pieces = chunk_text("long text ...", max_chars=1000, overlap_chars=200)
    chunks = index_documents([(doc.id, doc.title, doc.text, doc.metadata)], embedder.embed, KeywordAnalyzer())
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from pipeline.parsing import PdfLimits, PdfRefused, read_pdf
from pipeline.platform.settings import get_settings
from pipeline.retrieval.analyzer import KeywordAnalyzer, bm25_text, known_language, normalise_code
from pipeline.retrieval.sentence_vectors import chunk_units, pack
from pipeline.retrieval.vector_store import IndexedChunk
from pipeline.security.storable import NotStorable, loads_checked, problems, text_problem
from pipeline.text import split_sentences

MAX_DOCUMENT_CHARS = 1_000_000


class DocumentIn(BaseModel):
    id: str = Field(min_length=1, max_length=400)
    title: str = Field("", max_length=2000)
    text: str = Field(min_length=1, max_length=MAX_DOCUMENT_CHARS)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) else value

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


def read_documents(path: Path, pdf_limits: PdfLimits | None = None) -> list[DocumentIn]:
    """JSON Lines (one document per line), or one plain-text / Markdown / PDF file as one document. A PDF is read
    within ``pdf_limits`` (default: the settings'), and refused by name past them."""
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        return [_storable(_read_pdf(path, pdf_limits or PdfLimits.from_settings(get_settings())), path)]
    text = path.read_text(encoding="utf-8")
    if suffix in (".txt", ".md", ".markdown") and (problem := text_problem(text)):
        raise IngestError(f"{path.name}: the text {problem}")
    if suffix in (".jsonl", ".ndjson"):
        return parse_jsonl(text)
    if suffix in (".txt", ".md", ".markdown"):
        if not text.strip():
            raise IngestError(f"{path.name}: the file is empty")
        title = path.stem
        if suffix != ".txt":
            heading = next((line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")), None)
            title = heading or title
            text = _markdown_to_text(text)
        return [DocumentIn(id=path.stem, title=title, text=text, metadata={"source": path.name})]
    raise IngestError(f"{path.name}: unsupported file type {suffix or '(none)'}; use .jsonl, .txt or .md")


def _storable(doc: DocumentIn, path: Path) -> DocumentIn:
    found = list(problems(doc.model_dump()))
    if found:
        raise IngestError(f"{path.name}: {NotStorable(found)}")
    return doc


def _read_pdf(path: Path, limits: PdfLimits) -> DocumentIn:
    try:
        pdf = read_pdf(path, limits)
    except PdfRefused as exc:
        raise IngestError(f"{path.name}: {exc}") from None
    text = "\n\n".join(p.strip() for p in pdf.pages if p.strip())
    if not text:
        raise IngestError(f"{path.name}: the PDF has no extractable text (scanned pages need OCR first)")
    return DocumentIn(id=path.stem, title=pdf.title or path.stem, text=text,
                      metadata={"source": path.name, "pages": len(pdf.pages)})


def _markdown_to_text(markdown: str) -> str:
    """Markup out, sentences kept: headings end a sentence, links keep their text, code fences keep their code."""
    lines = []
    for line in markdown.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            continue
        if stripped.startswith("#"):
            stripped = stripped.lstrip("#").strip()
            if stripped and stripped[-1] not in ".!?:":
                stripped += "."
        stripped = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", stripped)
        stripped = re.sub(r"[*_`]{1,3}([^*_`]+)[*_`]{1,3}", r"\1", stripped)
        stripped = re.sub(r"^([-*+]|\d+\.)\s+", "", stripped)
        lines.append(stripped)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


@dataclass
class ChunkingConfig:
    max_chars: int = 1000
    overlap_chars: int = 200
    # Large groups: the model sorts a call's texts by length, so bigger calls waste less on padding.
    embed_batch: int = 512
    # Each chunk's sentences embedded too and stored with it (pipeline.retrieval.sentence_vectors): ingestion does
    # about twice the model's work so that a job's reranker and answer need none of it.
    sentence_vectors: bool = True


def index_documents(
    docs: list[tuple[str, str, str, dict[str, Any]]],
    embed: Callable[[list[str]], list[list[float]]],
    analyzer: KeywordAnalyzer,
    chunking: ChunkingConfig = ChunkingConfig(),
) -> list[IndexedChunk]:
    """Chunk ``(document_id, title, text, metadata)`` tuples and embed every chunk, in batches across documents;
    with ``chunking.sentence_vectors`` each chunk's sentences too (a sentence repeated in the overlap of two chunks,
    or in two documents of one call, is embedded once)."""
    pending: list[tuple[str, str, str, dict[str, Any], int]] = []
    for document_id, title, text, metadata in docs:
        for i, piece in enumerate(chunk_text(text, chunking.max_chars, chunking.overlap_chars)):
            pending.append((document_id, title, piece, metadata, i))
    chunks: list[IndexedChunk] = []
    for start in range(0, len(pending), chunking.embed_batch):
        batch = pending[start : start + chunking.embed_batch]
        # The title travels with each piece: it often carries the words a query uses.
        vectors = embed([f"{title}. {piece}" if title else piece for _, title, piece, _, _ in batch])
        for (document_id, title, piece, metadata, i), vector in zip(batch, vectors, strict=True):
            language, keywords = chunk_keywords(analyzer, title, piece, metadata)
            chunks.append(
                IndexedChunk(
                    id=f"{document_id}#{i}",
                    document_id=document_id,
                    title=title,
                    text=piece,
                    keywords=keywords,
                    vector=vector,
                    metadata={**metadata, "language": language},
                )
            )
    if chunking.sentence_vectors:
        _add_sentence_vectors(chunks, embed, chunking.embed_batch)
    return chunks


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
                          batch: int) -> None:
    units = [chunk_units(c.title, c.text) for c in chunks]
    distinct = list(dict.fromkeys(u for own in units for u in own))
    vectors: dict[str, list[float]] = {}
    for start in range(0, len(distinct), batch):
        texts = distinct[start : start + batch]
        vectors.update(zip(texts, embed(texts), strict=True))
    for chunk, own in zip(chunks, units, strict=True):
        chunk.sentences = pack(own, [vectors[u] for u in own])
