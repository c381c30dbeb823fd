"""VectorStore after a Milvus restart: a released collection is loaded again, with a fake MilvusClient.

The fake answers a search on a released collection as milvus-lite server does after a restart (measured:
``MilvusException`` code 101, "Collection 'c1' is in state 'released'; call load() before search/get/query").
"""

from __future__ import annotations

import threading
import time
from typing import ClassVar

import pymilvus
import pytest
from pymilvus import MilvusException

from agentsearch.pipeline.retrieval import vector_store as vector_store_module
from agentsearch.pipeline.retrieval.vector_store import (
    COLLECTION_NOT_LOADED,
    GRPC_OPTIONS,
    LANGUAGES_TIMEOUT_S,
    LOAD_WAIT_S,
    READ_TIMEOUT_S,
    VectorStore,
    is_released,
)

ROW = {"id": "d1#0", "distance": 0.9,
       "entity": {"document_id": "d1", "title": "Q4", "text": "Revenue reached $412 million.", "metadata": {}}}


class FakeMilvus:
    """One collection ``c1``; ``restart()`` releases it, as a server restart does (its data stays)."""

    instances: ClassVar[list[FakeMilvus]] = []

    def __init__(self, uri: str, token: str = "", **kwargs) -> None:
        self.uri, self.kwargs = uri, kwargs
        self.collections = {"c1"}
        self.loaded: set[str] = set()
        self.loads = 0
        self.load_s: dict[str, float] = {}  # how long a load of each collection takes (Milvus Lite: 14-72 s)
        self.calls: list[str] = []
        self.down = False
        self.timeouts: list[tuple[str, float | None]] = []
        FakeMilvus.instances.append(self)

    def restart(self) -> None:
        self.loaded.clear()

    def _answer(self, name: str, what: str):
        self.calls.append(what)
        if self.down:
            raise MilvusException(code=2, message="Fail connecting to server on 127.0.0.1:19530")
        if name not in self.loaded:
            raise MilvusException(code=COLLECTION_NOT_LOADED,
                                  message=f"Collection '{name}' is in state 'released'; call load() before "
                                          "search/get/query")

    def has_collection(self, name: str, timeout: float | None = None) -> bool:
        self.timeouts.append(("has_collection", timeout))
        return name in self.collections

    def load_collection(self, name: str, timeout: float | None = None) -> None:
        self.timeouts.append(("load_collection", timeout))
        self.loads += 1
        took = self.load_s.get(name, 0.0)
        time.sleep(took)
        if timeout is not None and took > timeout:
            raise MilvusException(code=1, message="Deadline Exceeded")
        self.loaded.add(name)

    def search(self, name, data, limit, anns_field, search_params, output_fields, consistency_level, filter="",
               timeout=None):
        self.timeouts.append(("search", timeout))
        self._answer(name, f"search:{anns_field}")
        return [[ROW]]

    def query(self, name, filter, output_fields, limit, timeout=None):
        self.timeouts.append(("query", timeout))
        self._answer(name, "query")
        return [{"metadata": {"language": "de"}}, {"metadata": {"language": "en"}}, {"metadata": {"language": "de"}}]

    def get(self, name, ids, output_fields, timeout=None):
        self._answer(name, "get")
        return [{"id": i, "vector": [0.1, 0.2]} for i in ids]


@pytest.fixture
def store(monkeypatch) -> VectorStore:
    FakeMilvus.instances.clear()
    monkeypatch.setattr(pymilvus, "MilvusClient", FakeMilvus)  # vector_store imports it on first use
    return VectorStore("http://127.0.0.1:19530")


def milvus(store: VectorStore) -> FakeMilvus:
    return store._client  # type: ignore[return-value]


def test_a_search_that_meets_a_released_collection_loads_it_and_searches_again(store):
    assert [h.document_id for h in store.dense_search("c1", [0.1, 0.2], 5)] == ["d1"]
    assert milvus(store).loads == 1
    milvus(store).restart()  # this process still remembers having loaded c1
    assert [h.document_id for h in store.dense_search("c1", [0.1, 0.2], 5)] == ["d1"]
    assert milvus(store).loads == 2
    assert milvus(store).calls == ["search:vector", "search:vector", "search:vector"]  # one refused, retried once


def test_keyword_search_and_vector_reads_load_a_released_collection_too(store):
    store.dense_search("c1", [0.1, 0.2], 5)
    milvus(store).restart()
    assert [h.score for h in store.keyword_search("c1", "revenu", 5)] == [0.9]
    milvus(store).restart()
    assert store.vectors("c1", ["d1#0"]) == {"d1#0": [0.1, 0.2]}
    assert milvus(store).loads == 3


def test_other_milvus_errors_are_raised_for_the_retriever_to_retry(store):
    store.dense_search("c1", [0.1, 0.2], 5)
    milvus(store).down = True
    with pytest.raises(MilvusException) as raised:
        store.dense_search("c1", [0.1, 0.2], 5)
    assert raised.value.code == 2 and milvus(store).loads == 1  # not taken for a released collection


def test_a_collection_dropped_while_released_finds_nothing(store):
    store.dense_search("c1", [0.1, 0.2], 5)
    milvus(store).restart()
    milvus(store).collections.clear()
    assert store.dense_search("c1", [0.1, 0.2], 5) == []


def test_released_is_told_by_the_servers_code_not_the_message():
    assert is_released(MilvusException(code=101, message="anything"))
    assert not is_released(MilvusException(code=2, message="collection is in state 'released'"))
    assert not is_released(RuntimeError("call load() before search"))


def test_the_client_gets_its_own_grpc_connection_and_a_short_reconnect_backoff(store):
    options = milvus(store).kwargs["grpc_options"]
    assert options == GRPC_OPTIONS and options["grpc.use_local_subchannel_pool"] == 1


def test_the_language_read_before_a_search_is_bounded_at_every_call(store):
    # Unbounded, pymilvus retries an unreachable server for minutes, and the search step waited with it.
    assert store.languages("c1") == {"de": 2, "en": 1}
    assert milvus(store).timeouts == [("has_collection", LANGUAGES_TIMEOUT_S), ("load_collection", LANGUAGES_TIMEOUT_S),
                                      ("query", LANGUAGES_TIMEOUT_S)]
    milvus(store).down = True
    with pytest.raises(MilvusException):
        store.languages("c1")


def test_every_read_of_a_search_has_a_deadline(store):
    # A server that took a request and never answers (one just restarted) is otherwise waited on for ever.
    store.dense_search("c1", [0.1, 0.2], 5)
    milvus(store).restart()
    store.keyword_search("c1", "revenu", 5)
    waits = milvus(store).timeouts
    assert waits and all(timeout == (LOAD_WAIT_S if call == "load_collection" else READ_TIMEOUT_S)
                         for call, timeout in waits)
    assert {call for call, _ in milvus(store).timeouts} == {"has_collection", "load_collection", "search"}


def test_a_load_slower_than_the_read_deadline_is_waited_for_and_holds_up_no_other_collection(store, monkeypatch):
    # After a restart the load took 14 s at 10,000 chunks and 72 s at 100,000: a search that waited the read
    # deadline for it failed, and every search after it too until one load finished.
    monkeypatch.setattr(vector_store_module, "READ_TIMEOUT_S", 0.05)
    milvus(store).collections.add("c2")
    milvus(store).load_s["c1"] = 0.6
    found: list[str] = []
    slow = threading.Thread(target=lambda: found.extend(h.document_id for h in store.dense_search("c1", [0.1], 5)))
    slow.start()
    time.sleep(0.1)
    started = time.monotonic()
    assert [h.document_id for h in store.dense_search("c2", [0.1], 5)] == ["d1"]
    assert time.monotonic() - started < 0.3  # not behind c1's load
    second = store.dense_search("c1", [0.1], 5)  # waits for the load under way, loads nothing itself
    slow.join(5)
    assert found == ["d1"] and [h.document_id for h in second] == ["d1"]
    assert milvus(store).loads == 2  # c1 once, c2 once
