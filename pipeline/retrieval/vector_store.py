"""One Milvus collection per agentsearch collection: chunks with a dense vector and a BM25 sparse vector.

The BM25 vector is computed by Milvus itself (a ``Function`` of type BM25) from ``keywords``, a field that holds
the chunk's text already analysed (stemmed) by ``KeywordAnalyzer``. Works against Milvus Lite (a local ``.db``
path, one process only), ``milvus-lite server`` and Milvus standalone through the same ``MilvusClient`` calls.

Usage::

    store = VectorStore("http://127.0.0.1:19530")
    store.ensure_collection("c_ab12", dimension=384)
    store.upsert("c_ab12", [IndexedChunk(id="d1#0", document_id="d1", title="t", text="...", keywords="...",
                                         vector=[...])])
    hits = store.dense_search("c_ab12", query_vector, limit=100)
    hits = store.keyword_search("c_ab12", "stem queri", limit=100)
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from pymilvus import DataType, Function, FunctionType, MilvusClient

MAX_TEXT_CHARS = 16000  # VARCHAR limits count bytes; this leaves room for multi-byte UTF-8
OUTPUT_FIELDS = ["document_id", "title", "text", "metadata"]


class SchemaMismatch(RuntimeError):
    pass


@dataclass
class IndexedChunk:
    id: str
    document_id: str
    title: str
    text: str
    vector: list[float]
    keywords: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Hit:
    id: str
    document_id: str
    title: str
    text: str
    score: float
    metadata: dict[str, Any]


class VectorStore:
    def __init__(self, uri: str, token: str | None = None) -> None:
        self.uri = uri
        self._client = MilvusClient(uri=uri, token=token or "")
        self._lock = threading.Lock()
        self._known: set[str] = set()
        self._loaded: set[str] = set()

    def ensure_collection(self, name: str, dimension: int) -> None:
        with self._lock:
            if name in self._known:
                return
            if self._client.has_collection(name):
                self._check_schema(name, dimension)
                self._known.add(name)
                return
            schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
            schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=512)
            schema.add_field("document_id", DataType.VARCHAR, max_length=512)
            schema.add_field("title", DataType.VARCHAR, max_length=2048)
            schema.add_field("text", DataType.VARCHAR, max_length=65535)
            schema.add_field("keywords", DataType.VARCHAR, max_length=65535, enable_analyzer=True,
                             analyzer_params={"type": "standard"})
            schema.add_field("metadata", DataType.JSON)
            schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dimension)
            schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
            schema.add_function(
                Function(name="bm25", function_type=FunctionType.BM25, input_field_names=["keywords"],
                         output_field_names=["sparse"])
            )
            index = self._client.prepare_index_params()
            index.add_index(field_name="vector", index_type="AUTOINDEX", metric_type="COSINE")
            index.add_index(field_name="sparse", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25")
            self._client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
            self._known.add(name)

    def _check_schema(self, name: str, dimension: int) -> None:
        fields = {f["name"]: f for f in self._client.describe_collection(name)["fields"]}
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
        rows = [
            {
                "id": c.id,
                "document_id": c.document_id,
                "title": c.title[:500],
                "text": c.text[:MAX_TEXT_CHARS],
                "keywords": (c.keywords or " ")[:MAX_TEXT_CHARS],
                "metadata": c.metadata,
                "vector": c.vector,
            }
            for c in chunks
        ]
        self._client.upsert(name, rows)
        if flush:
            self.flush(name)

    def flush(self, name: str) -> None:
        # A search right after ingest must see the rows, and Lite searches an unflushed buffer far slower.
        self._client.flush(name)

    def delete_documents(self, name: str, document_ids: list[str]) -> None:
        if document_ids and self._client.has_collection(name):
            quoted = ", ".join('"' + d.replace("\\", "\\\\").replace('"', '\\"') + '"' for d in document_ids)
            self._client.delete(name, filter=f"document_id in [{quoted}]")

    def _ensure_loaded(self, name: str) -> bool:
        """A collection made by another process (or before a restart) is released until loaded here."""
        with self._lock:
            if name in self._loaded:
                return True
            if not self._client.has_collection(name):
                return False
            self._client.load_collection(name)
            self._loaded.add(name)
            return True

    def _search(self, name: str, data: list, field: str, metric: str, limit: int) -> list[Hit]:
        if not self._ensure_loaded(name):
            return []
        results = self._client.search(
            name,
            data=data,
            limit=limit,
            anns_field=field,
            search_params={"metric_type": metric},
            output_fields=OUTPUT_FIELDS,
            consistency_level="Strong",
        )
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

    def dense_search(self, name: str, vector: list[float], limit: int) -> list[Hit]:
        return self._search(name, [vector], "vector", "COSINE", limit)

    def keyword_search(self, name: str, analyzed_query: str, limit: int) -> list[Hit]:
        if not analyzed_query.strip():
            return []
        return self._search(name, [analyzed_query], "sparse", "BM25", limit)

    def vectors(self, name: str, chunk_ids: list[str]) -> dict[str, list[float]]:
        if not chunk_ids or not self._ensure_loaded(name):
            return {}
        rows = self._client.get(name, ids=chunk_ids, output_fields=["vector"])
        return {str(r["id"]): [float(x) for x in r["vector"]] for r in rows}

    def drop_collection(self, name: str) -> None:
        with self._lock:
            self._known.discard(name)
            self._loaded.discard(name)
            if self._client.has_collection(name):
                self._client.drop_collection(name)

    def close(self) -> None:
        self._client.close()
