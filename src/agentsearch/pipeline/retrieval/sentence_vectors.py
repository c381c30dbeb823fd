"""Sentence vectors made at ingest and stored with each chunk, so a job reads them instead of running the model.

A job's reranker scores passages of its documents and the extractive answer scores their sentences, both by
embedding cosine. Embedding those sentences while the job waits was most of an uncached job's time (about 70% of
it on two cores); the chunk's own vector cannot stand in for them, since both look for the best part of a chunk.
So ingestion embeds each chunk's whole sentences (``chunk_units``) once and stores them with the chunk
(``pack``: float16, keyed by a digest of the exact text), and a job asks ``KnownVectors`` for the vectors of its
texts: those stored (or otherwise known, like the query's, which the search cached) are read, only the others are
embedded. A text that changed on the way (a redacted document) has another digest and is simply embedded.

Usage::

    units = chunk_units(title, chunk_text)                   # the texts ingestion embeds beside the chunk
    payload = pack(units, embed(units))                      # what the chunk's ``sentences`` field holds
    stored = unpack(payload)                                 # {text_key(text): vector}
    known = KnownVectors(embed, stored, lookup=cached_query_vector)
    vectors = known.embed([query, *sentences])               # like embed(): only the unknown texts are embedded
    stored = stored_for(store, documents, milvus_collection_name)   # what a job's documents have stored
    best_sentence_cosine(query_vector, [(title, chunk_text)], stored)  # the search's sentence signal, or None
"""

from __future__ import annotations

import base64
import hashlib
import struct
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from agentsearch.pipeline.text import whole_sentences

# Stored per chunk at most (the rest, rare with 1000-character chunks, are embedded when a job needs them): 60
# float16 vectors of 384 dimensions and their keys fit the 65,535 bytes of the Milvus field as base64.
MAX_STORED = 60
KEY_BYTES = 8
_HEADER = struct.Struct("<BHH")  # format version, vectors, dimension
_VERSION = 1

Vector = np.ndarray
Embed = Callable[[list[str]], list[list[float]]]


def text_key(text: str) -> bytes:
    """A short digest of the exact text: a stored vector is used only for the text it was made from."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=KEY_BYTES).digest()


def chunk_units(title: str, text: str) -> list[str]:
    """The texts of a chunk whose vectors are stored with it: its whole sentences, then its title (which the
    reranker adds to every passage), each once, at most ``MAX_STORED``."""
    units = list(dict.fromkeys(s for s in whole_sentences(text) if s.strip()))
    if title.strip() and title not in units:
        units.append(title)
    return units[:MAX_STORED]


def pack(texts: list[str], vectors: Iterable[Iterable[float]]) -> str:
    """The stored form of ``texts``' vectors: one ASCII string (header, keys, float16 values, base64)."""
    matrix = np.asarray(list(vectors), dtype=np.float16)
    if len(texts) == 0:
        return ""
    if matrix.ndim != 2 or len(matrix) != len(texts):
        raise ValueError(f"{len(texts)} texts but vectors of shape {matrix.shape}")
    keys = b"".join(text_key(t) for t in texts)
    raw = _HEADER.pack(_VERSION, len(texts), matrix.shape[1]) + keys + matrix.tobytes()
    return base64.b64encode(raw).decode("ascii")


def unpack(payload: str | None) -> dict[bytes, Vector]:
    """``{text_key: float32 vector}`` from ``pack``'s string; empty for an empty, foreign or damaged one."""
    if not payload:
        return {}
    try:
        raw = base64.b64decode(payload, validate=True)
        version, count, dimension = _HEADER.unpack_from(raw)
    except (ValueError, struct.error):
        return {}
    start = _HEADER.size + count * KEY_BYTES
    if version != _VERSION or len(raw) != start + count * dimension * 2:
        return {}
    keys = [raw[_HEADER.size + i * KEY_BYTES : _HEADER.size + (i + 1) * KEY_BYTES] for i in range(count)]
    matrix = np.frombuffer(raw, dtype=np.float16, offset=start).reshape(count, dimension).astype(np.float32)
    return dict(zip(keys, matrix, strict=True))


def stored_for(store, documents: Iterable, name_of: Callable[[str], str],
               default_collection: str | None = None) -> dict[bytes, Vector]:
    """The stored sentence vectors of the chunks these documents are (``metadata["chunk_id"]``), one read per
    collection (``metadata["collection_id"]``, else ``default_collection``; ``name_of`` gives its Milvus name).
    A read that fails costs only the stored vectors: the texts are then embedded."""
    chunks: dict[str, list[str]] = {}
    for doc in documents:
        chunk_id = doc.metadata.get("chunk_id")
        collection = doc.metadata.get("collection_id") or default_collection
        if chunk_id and collection:
            chunks.setdefault(str(collection), []).append(str(chunk_id))
    stored: dict[bytes, Vector] = {}
    for collection, ids in chunks.items():
        try:
            stored.update(store.sentence_vectors(name_of(collection), list(dict.fromkeys(ids))))
        except Exception:  # noqa: BLE001 - the vectors are a shortcut, never a reason to fail a step
            continue
    return stored


def best_sentence_cosine(query: Vector, chunks: Iterable[tuple[str, str]],
                         stored: Mapping[bytes, Vector]) -> float | None:
    """The query's highest cosine with a stored sentence of these ``(title, text)`` chunks; None when none is stored.

    Each sentence is read alone and with its title (the two unit vectors added, as the reranker composes a passage),
    and the better reading counts: a sentence may answer by itself, or only with what its title says ("Fourth-quarter
    revenue was $349 million" under "Q4 2024 Results"). Alone only would lose the second; with the title only would
    blur the first where many passages share one title (an encyclopedia article's paragraphs).
    """
    best = None
    q = query / (float(np.linalg.norm(query)) or 1.0)
    for title, text in chunks:
        title_vector = stored.get(text_key(title)) if title.strip() else None
        if title_vector is not None:
            title_vector = title_vector / (float(np.linalg.norm(title_vector)) or 1.0)
        for unit in chunk_units(title, text):
            vector = stored.get(text_key(unit)) if unit != title else None
            if vector is None:
                continue
            vector = vector / (float(np.linalg.norm(vector)) or 1.0)
            cosine = float(q @ vector)
            if title_vector is not None:
                composed = vector + title_vector
                cosine = max(cosine, float(q @ composed) / (float(np.linalg.norm(composed)) or 1.0))
            best = cosine if best is None else max(best, cosine)
    return best


class KnownVectors:
    """``embed`` with vectors already made for some texts read first: ``stored`` (by ``text_key``), then
    ``lookup`` (a text's vector kept elsewhere, or None); the rest is embedded in one call.

    ``hits`` and ``embedded`` count the texts answered each way, for the job's metadata.
    """

    def __init__(self, embed: Embed, stored: Mapping[bytes, Vector] | None = None,
                 lookup: Callable[[str], list[float] | None] | None = None) -> None:
        self._embed = embed
        self._stored = stored or {}
        self._lookup = lookup
        self.hits = 0
        self.embedded = 0

    def embed(self, texts: list[str]) -> list[list[float]]:
        found: dict[str, list[float]] = {}
        for text in dict.fromkeys(texts):
            vector: np.ndarray | list[float] | None = self._stored.get(text_key(text))
            if vector is None and self._lookup is not None:
                vector = self._lookup(text)
            if vector is not None:
                found[text] = vector.tolist() if isinstance(vector, np.ndarray) else list(vector)
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            found.update(zip(missing, self._embed(missing), strict=True))
        self.hits += sum(1 for t in texts if t not in missing)
        self.embedded += len(missing)
        return [found[t] for t in texts]
