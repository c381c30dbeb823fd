"""One Milvus collection per agentsearch collection: chunks with a dense vector, searched by cosine similarity.

Works against Milvus Lite (a local ``.db`` path, one process only), ``milvus-lite server`` and Milvus
standalone (``http://host:19530``) through the same ``MilvusClient`` calls.

Usage::

    store = VectorStore("http://127.0.0.1:19530")
    store.ensure_collection("c_ab12", dimension=384)
    store.upsert("c_ab12", [IndexedChunk(id="d1", document_id="d1", title="t", text="...", vector=[...])])
    hits = store.search("c_ab12", query_vector, top_k=5)
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from pymilvus import DataType, MilvusClient

MAX_TEXT_CHARS = 16000  # VARCHAR limits count bytes; this leaves room for multi-byte UTF-8


@dataclass
class IndexedChunk:
    id: str
    document_id: str
    title: str
    text: str
    vector: list[float]
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
            if name in self._known or self._client.has_collection(name):
                self._known.add(name)
                return
            schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
            schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=512)
            schema.add_field("document_id", DataType.VARCHAR, max_length=512)
            schema.add_field("title", DataType.VARCHAR, max_length=2048)
            schema.add_field("text", DataType.VARCHAR, max_length=65535)
            schema.add_field("metadata", DataType.JSON)
            schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dimension)
            index = self._client.prepare_index_params()
            index.add_index(field_name="vector", index_type="AUTOINDEX", metric_type="COSINE")
            self._client.create_collection(name, schema=schema, index_params=index, consistency_level="Strong")
            self._known.add(name)

    def upsert(self, name: str, chunks: list[IndexedChunk]) -> None:
        if not chunks:
            return
        rows = [
            {
                "id": c.id,
                "document_id": c.document_id,
                "title": c.title[:500],
                "text": c.text[:MAX_TEXT_CHARS],
                "metadata": c.metadata,
                "vector": c.vector,
            }
            for c in chunks
        ]
        self._client.upsert(name, rows)
        # A search right after ingest must see the rows, and Lite searches an unflushed buffer far slower.
        self._client.flush(name)

    def delete_documents(self, name: str, document_ids: list[str]) -> None:
        if document_ids:
            quoted = ", ".join(f'"{d}"' for d in (i.replace('"', '\\"') for i in document_ids))
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

    def search(self, name: str, vector: list[float], top_k: int) -> list[Hit]:
        if not self._ensure_loaded(name):
            return []
        results = self._client.search(
            name,
            data=[vector],
            limit=top_k,
            anns_field="vector",
            search_params={"metric_type": "COSINE"},
            output_fields=["document_id", "title", "text", "metadata"],
            consistency_level="Strong",
        )
        hits = []
        for row in results[0]:
            entity = row["entity"]
            hits.append(
                Hit(
                    id=str(row["id"]),
                    document_id=entity["document_id"],
                    title=entity["title"],
                    text=entity["text"],
                    score=float(row["distance"]),
                    metadata=entity.get("metadata") or {},
                )
            )
        return hits

    def drop_collection(self, name: str) -> None:
        with self._lock:
            self._known.discard(name)
            self._loaded.discard(name)
            if self._client.has_collection(name):
                self._client.drop_collection(name)

    def close(self) -> None:
        self._client.close()
