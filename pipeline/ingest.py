"""Ingestion: parse JSON Lines, cut documents into sentence-aligned chunks, embed them and index them in Milvus.

Usage::

    docs = parse_jsonl(path.read_text())                  # DocumentIn list; a bad line raises with its number
    chunks = chunk_text("long text ...", max_chars=1200)
    count = index_documents(services, collection, rows)    # replaces earlier vectors of the same documents
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from pipeline.retrieval.vector_store import IndexedChunk
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
    docs: list[DocumentIn] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            docs.append(DocumentIn.model_validate(json.loads(line)))
        except json.JSONDecodeError as exc:
            raise IngestError(f"line {number}: not valid JSON ({exc.msg})") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "document"
            raise IngestError(f"line {number}: {where}: {first['msg']}") from None
    if not docs:
        raise IngestError("no documents found")
    return docs


def chunk_text(text: str, max_chars: int = 1200) -> list[str]:
    """Pack whole sentences into chunks of at most ``max_chars`` (a longer sentence becomes its own chunk)."""
    chunks: list[str] = []
    current = ""
    for sentence in split_sentences(text) or [text]:
        if current and len(current) + 1 + len(sentence) > max_chars:
            chunks.append(current)
            current = sentence
        else:
            current = f"{current} {sentence}".strip()
    if current:
        chunks.append(current)
    return chunks


def build_chunks(document_id: str, title: str, text: str, metadata: dict[str, Any], vectors_for) -> list[IndexedChunk]:
    pieces = chunk_text(text)
    # The title is embedded with each piece: it often carries the words a query uses.
    vectors = vectors_for([f"{title}. {p}" if title else p for p in pieces])
    return [
        IndexedChunk(
            id=f"{document_id}#{i}", document_id=document_id, title=title, text=p, vector=v, metadata=metadata
        )
        for i, (p, v) in enumerate(zip(pieces, vectors, strict=True))
    ]
