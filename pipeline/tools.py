"""What agents may use beyond their input, handed to them as ``ctx.tools``.

Agents stay free of clients and connections: they ask the toolbox. Everything here is per process and lazy.

Usage (inside an agent's ``run``)::

    tools: AgentTools = ctx.tools
    docs = tools.search(ctx.collection_id, "turbine maintenance", top_k=5, strategy="keyword")
    vectors = tools.embed(["a phrase", "another"])
    counts = tools.vocabulary(ctx.collection_id)            # {word: count} of the collection's text
    acronyms = tools.acronyms(ctx.collection_id)            # {"PPA": "power purchase agreement", ...}
    if tools.llm is not None:
        reply = tools.llm.complete([{"role": "user", "content": "..."}], timeout_s=10)
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from functools import cached_property

from sqlalchemy import select

from pipeline.agents.base import Document
from pipeline.db import Collection, DocumentRow
from pipeline.llm import LLMClient
from pipeline.retrieval.config import SearchConfig
from pipeline.text import words

LEXICON_TTL_S = 24 * 3600


class AgentTools:
    def __init__(self, services) -> None:
        self._services = services

    @cached_property
    def llm(self) -> LLMClient | None:
        return LLMClient.from_settings(self._services.settings)

    def breaker(self, name: str, fail_max: int, reset_timeout_s: float):
        """A circuit breaker shared by every worker through Redis, for an agent's own dependency (an endpoint)."""
        from redis.exceptions import RedisError

        from pipeline.runner import OPEN_GATE

        try:
            return self._services.runner.breakers.get(f"tool:{name}", fail_max, reset_timeout_s)
        except RedisError:
            return OPEN_GATE

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self._services.embedder.embed(texts)

    def search(self, collection_id: str, query: str, top_k: int = 10, strategy: str = "hybrid") -> list[Document]:
        from pipeline.stages import milvus_collection_name

        config = SearchConfig(strategy=strategy, top_k=top_k, fusion=self._services.settings.search_fusion)
        result = self._services.retriever.search(
            milvus_collection_name(collection_id), query, config, epoch=self.epoch(collection_id),
            model=self._services.settings.embedding_model,
        )
        return result.documents

    def epoch(self, collection_id: str) -> int:
        with self._services.db.session() as s:
            collection = s.get(Collection, uuid.UUID(collection_id))
            return collection.index_epoch if collection else 0

    def collection_texts(self, collection_id: str) -> list[str]:
        with self._services.db.session() as s:
            rows = s.execute(
                select(DocumentRow.title, DocumentRow.text).where(
                    DocumentRow.collection_id == uuid.UUID(collection_id), DocumentRow.status == "indexed"
                )
            ).all()
        return [f"{title}. {text}" for title, text in rows]

    def vocabulary(self, collection_id: str) -> dict[str, int]:
        """Word counts of the collection's indexed text, cached in Redis per index epoch."""
        return self._lexicon(collection_id, "vocabulary", lambda texts: dict(Counter(w for t in texts for w in words(t))))

    def acronyms(self, collection_id: str) -> dict[str, str]:
        """Acronym definitions mined from the collection's text, cached per index epoch."""
        from pipeline.acronyms import mine_acronyms

        return self._lexicon(collection_id, "acronyms", mine_acronyms)

    def _lexicon(self, collection_id: str, kind: str, build) -> dict:
        cache = self._services.runner.cache
        key = cache.key("lexicon", kind, collection_id, str(self.epoch(collection_id)))
        if (cached := cache.get(key)) is not None:
            return json.loads(cached)
        value = build(self.collection_texts(collection_id))
        cache.set(key, json.dumps(value), LEXICON_TTL_S)
        return value
