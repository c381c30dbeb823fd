"""A collection's Milvus data rebuilt from PostgreSQL, which holds every document's text: the source of truth.

Every indexed document is chunked and embedded again by ingestion's own code
(``agentsearch.pipeline.ingestion.indexing``, with the service's chunking, model and late-chunking settings) into a new
generation of the collection's Milvus collection, which no search reads while it fills; then the collection's alias
moves to it in one call (``VectorStore.switch``) and the old generation is dropped. A search reads the old index or the
new one, never one half built, and the collection stays searchable throughout; after Milvus lost its data, the rebuild
is how it comes back.

Documents ingested, changed or deleted while the rebuild runs went to the old generation: before the alias moves,
the documents changed since the rebuild read them (their row's ``updated_at`` is another), or that it never read,
are indexed again into the new one and those deleted meanwhile are taken out of it (``catch_up``); once more after
the switch, for a task that wrote to the old one in its last moment. A document nothing changed is written once.

Usage::

    result = reindex_collection(services, collection_id, on_progress=lambda done, chunks: ...)
    result.chunks, result.chunks_per_s, result.caught_up

It runs in the calling process (``agentsearch reindex``), not as tasks on the ingest queue: one owner of the new
generation from its creation to the switch, nothing to coordinate between hosts, and the ingest workers stay free
for uploads meanwhile. A rebuild that stops half-way leaves the old generation searched and a partial new one,
which the next rebuild drops first.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, text, update

from agentsearch.pipeline.ingestion.chunking import ChunkingConfig
from agentsearch.pipeline.ingestion.indexing import index_documents, span_reader
from agentsearch.pipeline.platform.tables.collections import CollectionRow, DocumentRow
from agentsearch.pipeline.retrieval import language
from agentsearch.pipeline.retrieval.stored_chunks import IndexedChunk
from agentsearch.pipeline.services import Services

# Documents read, embedded and written at a time: enough chunks for the model's batches (512 texts), few enough
# that a transaction is short and the progress moves.
BATCH_DOCUMENTS = 128
# An indexing task that wrote to the old generation just before the switch records its documents a moment later
# (replace_documents, then the row's update): the last catch-up reads the rows after this wait.
SETTLE_S = 2.0


class ReindexBusy(RuntimeError):
    """Another rebuild of the same collection is running."""


@dataclass
class ReindexResult:
    collection_id: str
    name: str
    documents: int
    chunks: int
    seconds: float  # the rebuild, from reading the first document to the switch
    caught_up: int  # documents indexed again after the switch (changed during the rebuild)
    removed: int  # documents taken out after the switch (deleted during the rebuild)
    generation: str  # the Milvus collection searched now
    dropped: str | None  # the one searched before, now gone

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.seconds if self.seconds > 0 else 0.0


def reindex_collection(services: Services, collection_id: str | uuid.UUID,
                       on_progress: Callable[[int, int], None] | None = None) -> ReindexResult:
    """Rebuild one collection's Milvus data; ``on_progress(documents, chunks)`` after each batch written."""
    cid = uuid.UUID(str(collection_id))
    settings, store, embedder = services.settings, services.vector_store, services.embedder
    with services.db.session() as s:
        collection = s.get(CollectionRow, cid)
        if collection is None:
            raise LookupError(f"no collection {cid}")
        name, alias = collection.name, collection.milvus_name
    chunking = ChunkingConfig(settings.chunk_chars, settings.chunk_overlap_chars)
    with _only_rebuild(services, cid):
        searched = store.target(alias)
        for leftover in store.generations(alias):
            if leftover != searched:
                store.drop_generation(leftover)  # a rebuild that stopped half-way
        embedder.embed([name])  # the models loaded before the clock starts
        language.warm_up()
        started = time.monotonic()
        built = store.new_generation(alias, embedder.dimension)
        documents = chunks = 0
        indexed: dict[str, datetime] = {}  # what the new generation holds: each document as of its row's update
        for rows in _indexed_rows(services, cid):
            made = _chunks_of(services, rows, chunking)
            store.upsert(built, made, flush=False)
            documents, chunks = documents + len(rows), chunks + len(made)
            indexed.update((r.external_id, r.updated_at) for r in rows)
            if on_progress is not None:
                on_progress(documents, chunks)
        store.flush(built)
        # What changed while it was built goes into it before anything searches it; what changed in the last moment
        # (a task that wrote to the old generation just before the switch) once more after the switch.
        caught_up, removed = catch_up(services, cid, built, indexed, chunking)
        previous = store.switch(alias, built)
        seconds = time.monotonic() - started
        time.sleep(SETTLE_S)
        again, gone = catch_up(services, cid, alias, indexed, chunking)
        caught_up, removed = caught_up + again, removed + gone
        if previous is not None and previous != built:
            store.drop_generation(previous)
        with services.db.session() as s:
            # The cached searches of the collection were answered from the old index; and the collection is now
            # indexed with the service's model, whatever it was before.
            s.execute(update(CollectionRow).where(CollectionRow.id == cid).values(
                index_epoch=CollectionRow.index_epoch + 1, embedding_model=settings.embedding_model))
    return ReindexResult(str(cid), name, documents, chunks, seconds, caught_up, removed, built, previous)


def catch_up(services: Services, collection_id: uuid.UUID, name: str, indexed: dict[str, datetime],
             chunking: ChunkingConfig) -> tuple[int, int]:
    """The documents whose row changed since ``indexed`` read it (or that it does not hold) indexed again into
    ``name`` (the new generation, or the alias once it names it), and those no longer indexed (deleted meanwhile)
    taken out of it; ``indexed`` follows. Returns how many of each."""
    store = services.vector_store
    with services.db.session() as s:
        now = dict(s.execute(select(DocumentRow.external_id, DocumentRow.updated_at).where(
            DocumentRow.collection_id == collection_id, DocumentRow.status == "indexed")).all())
        stale = [external_id for external_id, updated in now.items() if indexed.get(external_id) != updated]
        changed = s.scalars(select(DocumentRow).where(
            DocumentRow.collection_id == collection_id, DocumentRow.external_id.in_(stale))).all() if stale else []
    if changed:
        store.replace_documents(name, [r.external_id for r in changed], _chunks_of(services, changed, chunking))
        indexed.update((r.external_id, r.updated_at) for r in changed)
    gone = sorted(set(indexed) - set(now))
    if gone:
        store.delete_documents(name, gone)
        store.flush(name)
        for external_id in gone:
            del indexed[external_id]
    return len(changed), len(gone)


def _chunks_of(services: Services, rows: Sequence[DocumentRow], chunking: ChunkingConfig) -> list[IndexedChunk]:
    """The rows' chunks as ingestion makes them, with the service's model and settings."""
    docs = [(r.external_id, r.title, r.text, dict(r.metadata_ or {})) for r in rows]
    parts = {r.external_id: r.parts for r in rows if r.parts}
    embedder = services.embedder
    return index_documents(docs, embedder.embed, services.analyzer, chunking, parts,
                           embed_spans=span_reader(embedder, services.settings.late_chunking))


def _indexed_rows(services: Services, collection_id: uuid.UUID) -> Iterator[list[DocumentRow]]:
    """The collection's indexed documents, ``BATCH_DOCUMENTS`` at a time, each batch its own short read (by id, so
    a row changed meanwhile is neither read twice nor skipped)."""
    after: uuid.UUID | None = None
    while True:
        with services.db.session() as s:
            query = select(DocumentRow).where(DocumentRow.collection_id == collection_id,
                                              DocumentRow.status == "indexed")
            if after is not None:
                query = query.where(DocumentRow.id > after)
            rows = s.scalars(query.order_by(DocumentRow.id).limit(BATCH_DOCUMENTS)).all()
        if not rows:
            return
        yield list(rows)
        after = rows[-1].id


@contextmanager
def _only_rebuild(services: Services, collection_id: uuid.UUID) -> Iterator[None]:
    """A PostgreSQL advisory lock on the collection for the rebuild's length: a second rebuild of it at once is
    refused (``ReindexBusy``) rather than dropping the first one's generation. Embedded (SQLite), Milvus Lite's file
    has one process anyway."""
    engine = services.db.engine
    if engine.dialect.name != "postgresql":
        yield
        return
    key = collection_id.int & 0x7FFF_FFFF_FFFF_FFFF  # advisory locks take a signed 64-bit key
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if not conn.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": key}).scalar():
            raise ReindexBusy("another reindex of this collection is running")
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": key})
