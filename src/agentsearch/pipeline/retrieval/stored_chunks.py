"""A collection's chunks as ``agentsearch.pipeline.retrieval.vector_store`` writes them to Milvus and finds them
again."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class IndexedChunk:
    """A chunk as it is written: its vector, the analyzed text its keyword search reads, its sentences."""

    id: str
    document_id: str
    title: str
    text: str
    vector: list[float]
    keywords: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    sentences: str = ""  # sentence_vectors.pack of the chunk's sentences; "" when none were made


@dataclass
class Hit:
    """A chunk as a search found it, with its score."""

    id: str
    document_id: str
    title: str
    text: str
    score: float
    metadata: dict[str, Any]
