"""One Milvus collection per agentsearch collection: chunks with a dense vector, a BM25 sparse vector and the
vectors of their sentences.

The BM25 vector is computed by Milvus itself (a ``Function`` of type BM25) from ``keywords``, a field that holds
the chunk's text already analysed (stemmed) by ``KeywordAnalyzer``. Works against Milvus Lite (a local ``.db``
path, one process only), ``milvus-lite server`` and Milvus standalone through the same ``MilvusClient`` calls.
The ``sentences`` field holds the chunk's sentence vectors (``agentsearch.pipeline.retrieval.sentence_vectors``), read
by ``sentence_vectors`` for a job's reranker and answer; a collection made before the field existed works without it
(its jobs embed those sentences themselves). The ``access_groups`` field holds a chunk's document groups as a plain
column (``agentsearch.pipeline.retrieval.access_field``): a search given a ``MetadataFilter`` writes its group clauses
on it when the collection has it, and on the metadata JSON when it was made before (``reindex`` upgrades it).

Usage::

    store = VectorStore("http://127.0.0.1:19530")
    store.ensure_collection("c_ab12", dimension=384)
    store.upsert("c_ab12", [IndexedChunk(id="d1#0", document_id="d1", title="t", text="...", keywords="...",
                                         vector=[...])])
    hits = store.dense_search("c_ab12", query_vector, limit=100)
    hits = store.keyword_search("c_ab12", "stem queri", limit=100)
    hits = store.dense_search("c_ab12", query_vector, limit=100,
                              filter_expr=MetadataFilter.model_validate(raw_filter).expression())
    stored = store.sentence_vectors("c_ab12", ["d1#0"])          # {text_key: vector} of those chunks' sentences
    store.languages("c_ab12")                                     # {"en": 812, "de": 40}: chunks per language
    built = store.new_generation("c_ab12", dimension=384)         # "c_ab12_g2", empty, searched by nobody yet
    store.switch("c_ab12", built)                                 # searches of "c_ab12" read it from now on

A collection's name is a Milvus alias of the collection that holds its chunks, one generation of it
(``c_ab12_g1``, ``c_ab12_g2``, ...): a rebuild (``agentsearch.pipeline.operations.reindex``) fills a new generation and
moves the alias in one call, so a search reads the old generation or the new one, never one half built. Every call here
takes the alias as Milvus does; a collection made before generations is a plain one under the name until its first
rebuild.

A Milvus server that restarts comes back with every collection released ("call load() before search"), while each
worker process still remembers having loaded it: a search, keyword search or vector read that meets a released
collection loads it again and retries once. A load waits ``LOAD_WAIT_S`` (the collection's own lock: searches of
other collections go on), so a job's search after a restart gets its results once the load ends, or is left
behind at its stage deadline while the load goes on for the next one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from agentsearch.pipeline.retrieval.access_field import ACCESS_FIELD, ACCESS_KEY, access_value
from agentsearch.pipeline.retrieval.collection_schema import SENTENCES_FIELD, create_collection
from agentsearch.pipeline.retrieval.filters import Filter, MetadataFilter
from agentsearch.pipeline.retrieval.metadata_index import derived_values
from agentsearch.pipeline.retrieval.milvus_channel import GRPC_OPTIONS, milvus
from agentsearch.pipeline.retrieval.sentence_vectors import unpack
from agentsearch.pipeline.retrieval.stored_chunks import Hit, IndexedChunk

MAX_TEXT_CHARS = 16000  # VARCHAR limits count bytes; this leaves room for multi-byte UTF-8
OUTPUT_FIELDS = ["document_id", "title", "text", "metadata"]
# Chunks read to learn a collection's languages: enough to see every language that holds a real share of it.
LANGUAGE_SAMPLE = 2000
# Every read a search makes has a deadline. Without one, pymilvus retries an unreachable server for minutes and
# waits on a server that took a request and never answers (one just restarted) for ever; a load waited on that way
# held the store's lock, and every later search of the process waited behind it, past its own stage deadline.
READ_TIMEOUT_S = 10.0
# The language read runs before the retrievers start: its wait counts against the search's own deadline.
LANGUAGES_TIMEOUT_S = 2.0
# A read that finds its collection released (a Milvus restart) waits this long for the load: longer than any stage
# deadline (a job's search leaves it behind at its own, 20 s by default), because the load takes 14 s at 10,000
# chunks and 72 s at 100,000 on Milvus Lite and a search that gave up at READ_TIMEOUT_S failed until one finished.
# Milvus goes on loading after a client stops waiting, and a second load waits for the first one's end.
LOAD_WAIT_S = 300.0
# HNSW's candidate list per dense search (Milvus Lite's default is 64): recall@10 against exact search fell to
# 0.867 at 100,000 chunks with the default (BENCHMARKS.md, "Scale").
DENSE_EF = 256
# Milvus's "collection not loaded" (merr.ErrCollectionNotLoaded, code 101; milvus-lite answers it as "Collection
# 'c_...' is in state 'released'; call load() before search/get/query"). pymilvus's ErrorCode names no constant for
# it, but MilvusException.code carries the server's code: matched on that, never on the message.
COLLECTION_NOT_LOADED = 101

# A generation's name is its collection's, this mark and a number (Milvus names take letters, digits and "_").
GENERATION_MARK = "_g"
# How long a store that lost the race to make a collection waits for the winner's to be listed.
MADE_WAIT_S = 10.0
# How long a rebuilt generation may take to load before the alias moves to it.
LOAD_TIMEOUT_S = 300.0

T = TypeVar("T")
log = logging.getLogger("agentsearch.retrieval")


def is_released(exc: BaseException) -> bool:
    """True for Milvus's answer to a search on a collection that is not loaded (released by a restart)."""
    return isinstance(exc, milvus().MilvusException) and exc.code == COLLECTION_NOT_LOADED


class SchemaMismatch(RuntimeError):
    pass


class VectorStore:
    def __init__(self, uri: str, token: str | None = None, dense_ef: int = DENSE_EF) -> None:
        self.uri, self.dense_ef = uri, dense_ef
        # Dedicated: pymilvus otherwise shares one connection per address among a process's clients, made with the
        # options of whichever came first and kept after its last client closes; an idle one kept that way (with
        # pymilvus's own keepalive, before GRPC_OPTIONS) had been cut by the server ("too_many_pings") and a new
        # store handed it failed to connect.
        self._client = milvus().MilvusClient(uri=uri, token=token or "", grpc_options=dict(GRPC_OPTIONS),
                                             dedicated=True)
        self._lock = threading.Lock()
        # One write at a time per process: Milvus Lite refuses a write that overtakes another on the same collection
        # ("current_seq is monotonic"), as the threads of an embedded worker's ingest and delete tasks did.
        self._writes = threading.RLock()
        self._known: set[str] = set()
        self._loaded: set[str] = set()
        self._loading: dict[str, threading.Lock] = {}  # one per collection: a long load holds up no other one
        # Each collection's field names (those made before a field existed lack it), asked once per process.
        self._fields: dict[str, frozenset[str]] = {}

    def ensure_collection(self, name: str, dimension: int) -> None:
        """The collection ``name`` (its alias) made when missing, as its first generation."""
        with self._lock:
            if name in self._known:
                return
            if self._client.has_collection(name):
                self._check_schema(name, dimension)
                self._known.add(name)
                return
            first = generation_name(name, 1)
            # Another process may have made it and not yet its alias; a rebuild never makes the first generation.
            # Two tasks of a new collection's first upload, on two workers, make it at the same moment: the one that
            # loses a race (the generation, the alias) finds the other's made and goes on, instead of failing its task.
            if not self._client.has_collection(first):
                self._made_by_someone(lambda: self._create(first, dimension),
                                      lambda: self._client.has_collection(first))
            if not self._is_alias(name):
                self._made_by_someone(lambda: self._client.create_alias(first, name), lambda: self._is_alias(name))
            self._known.add(name)
            self._fields.pop(name, None)

    def _create(self, name: str, dimension: int) -> None:
        create_collection(self._client, name, dimension)

    def target(self, name: str) -> str | None:
        """The Milvus collection that ``name`` is searched in: its alias's generation, ``name`` itself for a
        collection made before generations, None when there is neither."""
        if self._is_alias(name):
            return str(self._client.describe_alias(name, timeout=READ_TIMEOUT_S)["collection_name"])
        return name if self._client.has_collection(name, timeout=READ_TIMEOUT_S) else None

    def _is_alias(self, name: str) -> bool:
        # Asked, not tried: pymilvus logs every refused call as an error with its traceback.
        return name in self._client.list_aliases(timeout=READ_TIMEOUT_S)["aliases"]

    def generations(self, name: str) -> list[str]:
        """Every generation of ``name`` Milvus holds, oldest first: the one searched, and a rebuild's under way or
        left behind by one that stopped."""
        prefix = name + GENERATION_MARK
        numbers = [int(c[len(prefix):]) for c in self._client.list_collections(timeout=READ_TIMEOUT_S)
                   if c.startswith(prefix) and c[len(prefix):].isdigit()]
        return [generation_name(name, n) for n in sorted(numbers)]

    def new_generation(self, name: str, dimension: int) -> str:
        """An empty generation of ``name`` after every one there is (never the first, which ``ensure_collection``
        alone makes): nothing searches it until ``switch``."""
        numbers = [int(g.rsplit(GENERATION_MARK, 1)[1]) for g in self.generations(name)]
        built = generation_name(name, max([1, *numbers]) + 1)
        with self._writes:
            self._create(built, dimension)
        return built

    def switch(self, name: str, generation: str) -> str | None:
        """Searches of ``name`` read ``generation`` from now on: it is loaded first, then the alias moved in one
        call. Returns the Milvus collection searched before (None if there was none), for the caller to drop.

        A collection made before generations is renamed out of the way first: between the two calls (milliseconds)
        a search of it finds no chunks. That happens once, on its first rebuild."""
        self._client.load_collection(generation, timeout=LOAD_TIMEOUT_S)
        with self._lock, self._writes:
            previous = self.target(name)
            if previous == name:
                previous = generation_name(name, 0)
                self._client.rename_collection(name, previous)
            self._point_alias(name, generation)
            # This process's memory of the name was of the old generation; the next call learns the new one's.
            self._known.discard(name)
            self._loaded.discard(name)
            self._fields.pop(name, None)
        return previous

    @staticmethod
    def _made_by_someone(make: Callable[[], Any], made: Callable[[], bool], wait_s: float = MADE_WAIT_S) -> None:
        """``make()``, unless it fails because another process made the same thing first (``made()`` then, within
        ``wait_s``)."""
        try:
            make()
        except milvus().MilvusException:
            # The other maker may be midway: Milvus Lite makes a collection's folder before it lists the collection,
            # and a second make in between fails ("File exists") while the collection is not there yet.
            deadline = time.monotonic() + wait_s
            while not made():
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)

    def _point_alias(self, name: str, generation: str) -> None:
        if self._is_alias(name):
            self._client.alter_alias(generation, name)
        else:
            self._client.create_alias(generation, name)

    def count(self, name: str) -> int:
        """The chunks ``name`` holds (0 when there is no such collection)."""
        rows: list[dict[str, Any]]
        rows = self._on_loaded(name, lambda: self._client.query(name, filter="", output_fields=["count(*)"],
                                                                timeout=READ_TIMEOUT_S), [])
        return int(rows[0]["count(*)"]) if rows else 0

    def _check_schema(self, name: str, dimension: int) -> None:
        fields = {f["name"]: f for f in self._client.describe_collection(name)["fields"]}
        self._fields[name] = frozenset(fields)
        if "sparse" not in fields:
            raise SchemaMismatch(f"Milvus collection {name} predates keyword search; re-create it and re-ingest")
        have = int(fields["vector"].get("params", {}).get("dim", dimension))
        if have != dimension:
            raise SchemaMismatch(
                f"Milvus collection {name} holds {have}-dimensional vectors but the embedding model makes "
                f"{dimension}-dimensional ones; re-ingest into a new collection or configure the original model"
            )

    def upsert(self, name: str, chunks: list[IndexedChunk], flush: bool = True) -> None:
        if not chunks:
            return
        fields = self.fields(name)
        rows = [
            {
                "id": c.id,
                "document_id": c.document_id,
                "title": c.title[:500],
                "text": c.text[:MAX_TEXT_CHARS],
                "keywords": (c.keywords or " ")[:MAX_TEXT_CHARS],
                "metadata": c.metadata,
                "vector": c.vector,
                **({SENTENCES_FIELD: c.sentences} if SENTENCES_FIELD in fields else {}),
                **({ACCESS_FIELD: access_value(c.metadata.get(ACCESS_KEY))} if ACCESS_FIELD in fields else {}),
                **derived_values(c.metadata, fields),
            }
            for c in chunks
        ]
        with self._writes:
            self._client.upsert(name, rows)
            if flush:
                self.flush(name)

    def flush(self, name: str) -> None:
        # A search right after ingest must see the rows, and Lite searches an unflushed buffer far slower.
        with self._writes:
            self._client.flush(name)

    def delete_documents(self, name: str, document_ids: list[str]) -> None:
        if document_ids and self._client.has_collection(name):
            with self._writes:
                self._client.delete(name, filter=f"document_id in [{_quoted(document_ids)}]")

    def replace_documents(self, name: str, document_ids: list[str], chunks: list[IndexedChunk]) -> None:
        """The documents' chunks become ``chunks``: the new ones are written first, then the documents' other
        chunks deleted. A changed document's chunks have new ids (``agentsearch.pipeline.ingestion.indexing``), so every
        chunk a search finds is wholly of one version, and the document is never missing: until the old chunks go,
        a search finds chunks of both versions (and keeps one per document)."""
        with self._writes:
            self.upsert(name, chunks)
            if not document_ids:
                return
            keep = {c.id for c in chunks}
            expression = f"document_id in [{_quoted(document_ids)}]"
            rows: list[dict[str, Any]]
            rows = self._on_loaded(name, lambda: self._client.query(name, filter=expression, output_fields=["id"],
                                                                     timeout=READ_TIMEOUT_S), [])
            stale = [str(r["id"]) for r in rows if str(r["id"]) not in keep]
            if stale:
                self._client.delete(name, ids=stale)
                self.flush(name)

    def _ensure_loaded(self, name: str, timeout: float = LOAD_WAIT_S) -> bool:
        """A collection made by another process (or before a restart) is released until loaded here."""
        if name in self._loaded:
            return True
        with self._lock:
            loading = self._loading.setdefault(name, threading.Lock())
        with loading:
            if name in self._loaded:  # loaded by the search this one waited behind
                return True
            if not self._client.has_collection(name, timeout=min(timeout, READ_TIMEOUT_S)):
                return False
            self._client.load_collection(name, timeout=timeout)
            self._loaded.add(name)
            return True

    def load(self, name: str, timeout_s: float = LOAD_TIMEOUT_S) -> bool:
        """The collection loaded now, waiting up to ``timeout_s`` (a search's own load waits ``LOAD_WAIT_S``)."""
        return self._ensure_loaded(name, timeout_s)

    def _on_loaded(self, name: str, read: Callable[[], T], empty: T, timeout: float = LOAD_WAIT_S) -> T:
        """``read`` on a loaded collection (``empty`` if there is none); loaded again once if Milvus released it.

        ``_loaded`` is this process's memory, not Milvus's: after a server restart every collection is released
        while the set still names it, and every search failed until the process ended.
        """
        if not self._ensure_loaded(name, timeout):
            return empty
        try:
            return read()
        except milvus().MilvusException as exc:
            if not is_released(exc):
                raise
        log.warning("Milvus collection %s was released (a server restart?); loading it again", name)
        with self._lock:
            self._loaded.discard(name)
        if not self._ensure_loaded(name, timeout):
            return empty  # dropped meanwhile
        return read()

    def expression(self, name: str, filter_expr: Filter) -> str:
        """A filter as Milvus takes it for this collection: a ``MetadataFilter`` compiled with the collection's
        fields (its group clauses on ``access_groups`` where it has the field), an expression as it is."""
        if isinstance(filter_expr, MetadataFilter):
            return filter_expr.expression(self.fields(name))
        return filter_expr

    def _search(self, name: str, data: list, field: str, metric: str, limit: int,
                filter_expr: Filter = "") -> list[Hit]:
        # The filter is applied by Milvus inside the search, so `limit` counts documents that pass it.
        filter_expr = self.expression(name, filter_expr) if filter_expr else ""
        results = self._on_loaded(name, lambda: self._client.search(
            name,
            data=data,
            limit=limit,
            anns_field=field,
            filter=filter_expr,
            search_params={"metric_type": metric, **({"params": {"ef": max(self.dense_ef, limit)}}
                                                     if metric == "COSINE" else {})},
            output_fields=OUTPUT_FIELDS,
            consistency_level="Strong",
            timeout=READ_TIMEOUT_S,
        ), None)
        if results is None:
            return []
        return [
            Hit(
                id=str(row["id"]),
                document_id=row["entity"]["document_id"],
                title=row["entity"]["title"],
                text=row["entity"]["text"],
                # Some backends report BM25 as a negative distance; only the order is comparable across them.
                score=abs(float(row["distance"])) if metric == "BM25" else float(row["distance"]),
                metadata=row["entity"].get("metadata") or {},
            )
            for row in results[0]
        ]

    def dense_search(self, name: str, vector: list[float], limit: int, filter_expr: Filter = "") -> list[Hit]:
        return self._search(name, [vector], "vector", "COSINE", limit, filter_expr)

    def keyword_search(self, name: str, analyzed_query: str, limit: int, filter_expr: Filter = "") -> list[Hit]:
        if not analyzed_query.strip():
            return []
        return self._search(name, [analyzed_query], "sparse", "BM25", limit, filter_expr)

    def languages(self, name: str, sample: int = LANGUAGE_SAMPLE, timeout_s: float = LANGUAGES_TIMEOUT_S,
                  filter_expr: Filter = "") -> dict[str, int]:
        """How many chunks of each language (``metadata["language"]``, set at ingest) among up to ``sample``
        chunks (of those ``filter_expr`` keeps): the collection's languages, most chunks first. Empty for a
        collection that does not exist or whose chunks predate the field; a ``MilvusException`` after
        ``timeout_s`` when the server does not answer."""
        rows: list[dict[str, Any]]
        filter_expr = self.expression(name, filter_expr) if filter_expr else ""
        rows = self._on_loaded(name, lambda: self._client.query(name, filter=filter_expr, output_fields=["metadata"],
                                                                limit=sample, timeout=timeout_s), [], timeout_s)
        counts: dict[str, int] = {}
        for row in rows:
            language = (row.get("metadata") or {}).get("language")
            if isinstance(language, str) and language:
                counts[language] = counts.get(language, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def vectors(self, name: str, chunk_ids: list[str]) -> dict[str, list[float]]:
        if not chunk_ids:
            return {}
        rows: list[dict[str, Any]]
        rows = self._on_loaded(name, lambda: self._client.get(name, ids=chunk_ids, output_fields=["vector"],
                                                               timeout=READ_TIMEOUT_S), [])
        return {str(r["id"]): [float(x) for x in r["vector"]] for r in rows}

    def fields(self, name: str) -> frozenset[str]:
        """The collection's field names, asked once per process (a rebuild's ``switch`` forgets them)."""
        if name not in self._fields:
            described = self._client.describe_collection(name, timeout=READ_TIMEOUT_S)["fields"]
            self._fields[name] = frozenset(f["name"] for f in described)
        return self._fields[name]

    def _has_sentences(self, name: str) -> bool:
        return SENTENCES_FIELD in self.fields(name)

    def sentence_vectors(self, name: str, chunk_ids: list[str]) -> dict[bytes, np.ndarray]:
        """The stored sentence vectors of these chunks, ``{text_key(sentence): vector}``: one read, no model.
        Empty for a collection without them (made before the field existed) or one that does not exist."""
        if not chunk_ids or not self._client.has_collection(name, timeout=READ_TIMEOUT_S) \
                or not self._has_sentences(name):
            return {}
        rows: list[dict[str, Any]]
        rows = self._on_loaded(name, lambda: self._client.get(name, ids=chunk_ids, output_fields=[SENTENCES_FIELD],
                                                               timeout=READ_TIMEOUT_S), [])
        stored: dict[bytes, np.ndarray] = {}
        for row in rows:
            stored.update(unpack(row.get(SENTENCES_FIELD)))
        return stored

    def drop_collection(self, name: str) -> None:
        """The collection gone: its alias and every generation (Milvus refuses to drop one an alias names)."""
        with self._lock:
            self._known.discard(name)
            self._loaded.discard(name)
            self._fields.pop(name, None)
            searched = self.target(name)
            if searched is not None and searched != name:
                self._client.drop_alias(name)
            for collection in {*self.generations(name), *([searched] if searched else [])}:
                self.drop_generation(collection)

    def drop_generation(self, generation: str) -> None:
        """One Milvus collection dropped by its own name: a generation no alias names any more."""
        with self._writes:
            if self._client.has_collection(generation):
                self._client.drop_collection(generation)

    def close(self) -> None:
        self._client.close()


def generation_name(name: str, generation: int) -> str:
    return f"{name}{GENERATION_MARK}{generation}"


def _quoted(values: list[str]) -> str:
    """Strings as a Milvus expression's list items."""
    return ", ".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
