"""Documents' chunks embedded (with their sentences) and analysed for keywords, as the rows Milvus indexes.

Usage::

    chunks = index_documents([(doc.id, doc.title, doc.text, doc.metadata)], embedder.embed, KeywordAnalyzer(),
                             parts={doc.id: stored.parts})
    store.replace_documents(milvus_name, [doc.id], chunks)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from agentsearch.pipeline.ingestion.chunking import ChunkingConfig, chunk_parts, heading_of
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer, bm25_text, known_language, normalise_code
from agentsearch.pipeline.retrieval.sentence_vectors import chunk_units, pack
from agentsearch.pipeline.retrieval.stored_chunks import IndexedChunk
from agentsearch.pipeline.text import whole_sentences

# Texts, and for each its (start, end) character spans -> the texts' vectors and the spans' (None: not read).
SpanEmbed = Callable[[list[str], list[list[tuple[int, int]]]],
                     tuple[list[list[float]], list[list[list[float] | None]]]]


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
