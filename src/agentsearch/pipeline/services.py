"""The per-process set of clients a job step needs, created lazily.

Connections are made on first use, never at import time, because worker processes fork and gRPC (Milvus) and
database connections are not fork-safe. A forked child calls ``reset_services()`` before its first task.

Usage::

    services = get_services()
    services.runner.run(spec, inp, ctx)
    services.vector_store.search(name, vector, top_k=5)
    previous = use_services(Services(test_settings).use(retriever=fake))   # a test's own set, with a fake part
"""

from __future__ import annotations

import threading
from functools import cached_property
from typing import ClassVar

import redis

from agentsearch.pipeline.agents.registry import AgentRegistry
from agentsearch.pipeline.agents.runner import AgentRunner
from agentsearch.pipeline.agents.toolbox import AgentTools
from agentsearch.pipeline.observability.metrics import MetricsRecorder
from agentsearch.pipeline.platform.breakers import BreakerBoard
from agentsearch.pipeline.platform.cache import ResultCache
from agentsearch.pipeline.platform.db import Database
from agentsearch.pipeline.platform.kv import connect_redis
from agentsearch.pipeline.platform.settings import Settings, get_settings
from agentsearch.pipeline.retrieval.analyzer import KeywordAnalyzer
from agentsearch.pipeline.retrieval.embedder import TextEmbedder, make_embedder
from agentsearch.pipeline.retrieval.retriever import Retriever
from agentsearch.pipeline.retrieval.vector_store import VectorStore


class Services:
    # Parts made under the lock and kept under a private name; the others are cached properties, kept under their own.
    _LOCKED_PARTS: ClassVar[dict[str, str]] = {
        "embedder": "_embedder", "retriever": "_retriever", "vector_store": "_vector_store",
    }

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()

    def use(self, **parts: object) -> Services:
        """Ready-made parts instead of the ones this set would make (``retriever=``, ``embedder=``, ``runner=``, ...):
        a test's fakes, or the embedding model a pool process inherited from its parent."""
        with self._lock:
            for name, part in parts.items():
                if not hasattr(type(self), name):
                    raise AttributeError(f"Services has no part {name!r}")
                self.__dict__[self._LOCKED_PARTS.get(name, name)] = part
        return self

    @cached_property
    def db(self) -> Database:
        self.settings.ensure_data_dir()
        assert self.settings.database_url is not None  # Settings fills it in when it is not given
        return Database(self.settings.database_url, pool_size=self.settings.database_pool_size)

    @cached_property
    def redis(self) -> redis.Redis:
        return connect_redis(self.settings.redis_url, self.settings.redis_timeout_s)

    @cached_property
    def registry(self) -> AgentRegistry:
        return AgentRegistry.discover(self.settings.agent_modules)

    @cached_property
    def runner(self) -> AgentRunner:
        return AgentRunner(self.registry, self.redis, self.settings, tools=AgentTools(self), metrics=self.metrics)

    @property
    def breakers(self) -> BreakerBoard:
        """The runner's circuit breakers, which the toolbox gives agents for their own dependencies too."""
        return self.runner.breakers

    @property
    def result_cache(self) -> ResultCache:
        """The runner's result cache, which the toolbox keeps collections' lexicons in too."""
        return self.runner.cache

    @cached_property
    def metrics(self) -> MetricsRecorder:
        # In the store shared by every worker host: the API reads it back for /metrics.
        return MetricsRecorder(self.redis)

    @property
    def embedder(self) -> TextEmbedder:
        # Loading the model takes seconds; two threads asking at once must not load it twice. With
        # AGENTSEARCH_EMBEDDING_URL set it is the embeddings server's client instead: no model in this process.
        with self._lock:
            if "_embedder" not in self.__dict__:
                self.__dict__["_embedder"] = make_embedder(self.settings)
            return self.__dict__["_embedder"]

    @cached_property
    def analyzer(self) -> KeywordAnalyzer:
        return KeywordAnalyzer(self.settings.keyword_language)

    @property
    def retriever(self) -> Retriever:
        with self._lock:
            if "_retriever" not in self.__dict__:
                # The model loads on first embed, so a keyword-only search never waits for it.
                self.__dict__["_retriever"] = Retriever(
                    embed=self._embed_queries,
                    store=self._vector_store_locked(),
                    analyzer=self.analyzer,
                    cache=ResultCache(self.redis),
                )
            return self.__dict__["_retriever"]

    def uncached_retriever(self) -> Retriever:
        """A retriever of the same store and query side, with no result cache: evaluations time real work."""
        return Retriever(embed=self._embed_queries, store=self.vector_store, analyzer=self.analyzer, cache=None)

    def _embed_queries(self, texts: list[str]) -> list[list[float]]:
        # Queries through the query side of models that embed the two sides apart (E5's prefixes): a query embedded
        # as a passage scored 0.673 nDCG@10 where the query side scores 0.753 (XQuAD ar questions, en paragraphs).
        return getattr(self.embedder, "embed_queries", self.embedder.embed)(texts)

    def _vector_store_locked(self) -> VectorStore:
        if "_vector_store" not in self.__dict__:
            self.settings.ensure_data_dir()
            assert self.settings.milvus_uri is not None  # Settings fills it in when it is not given
            self.__dict__["_vector_store"] = VectorStore(self.settings.milvus_uri, self.settings.milvus_token)
        return self.__dict__["_vector_store"]

    @property
    def vector_store(self) -> VectorStore:
        with self._lock:
            return self._vector_store_locked()

    def close(self) -> None:
        if "db" in self.__dict__:
            self.db.dispose()
        if "_vector_store" in self.__dict__:
            self.__dict__["_vector_store"].close()
        if callable(close_embedder := getattr(self.__dict__.get("_embedder"), "close", None)):
            close_embedder()  # the embeddings server's connections; an in-process model has nothing to close


_services: Services | None = None
_services_lock = threading.Lock()


def get_services() -> Services:
    global _services
    with _services_lock:
        if _services is None:
            _services = Services(get_settings())
        return _services


def use_services(services: Services | None) -> Services | None:
    """Make ``services`` this process's set (what ``get_services`` returns to the tasks) and return the one it
    replaces, to put back; None makes a fresh set on next use. The seam for tests that run tasks in process."""
    global _services
    with _services_lock:
        previous, _services = _services, services
        return previous


def reset_services(settings: Settings | None = None) -> Services:
    """Drop this process's clients (after a fork, or in tests with other settings) and start afresh."""
    global _services
    with _services_lock:
        _services = Services(settings or get_settings())
        return _services
