"""The users' metadata filters on real Milvus Lite: an ``eq``, ``in``, ``range`` (and their ``not``) written on the
indexed fields returns the same rows as the same filter on the metadata JSON, in a dense and a keyword search; a
collection made before the fields answers on its JSON until a new generation (``reindex``) brings them.

Each case runs on an embedded Milvus Lite database of its own (the store as an embedded worker uses it): no server.
"""

from __future__ import annotations

import random

import pytest
from pymilvus import MilvusClient

from agentsearch.pipeline.retrieval.collection_schema import create_collection
from agentsearch.pipeline.retrieval.filters import MetadataFilter
from agentsearch.pipeline.retrieval.metadata_index import DAY_FIELD, TERMS_FIELD
from agentsearch.pipeline.retrieval.stored_chunks import IndexedChunk
from agentsearch.pipeline.retrieval.vector_store import VectorStore

pytestmark = pytest.mark.integration

DIM = 8
REGIONS = ["emea", "apac", "amer", ["emea", "apac"], None, 3, "em_a"]
DATES = ["2024-03-01", "2024-03-01T10:00:00Z", "2023-12-31", "2025-01-01", "March 2024", 20240301, None]
FILTERS = {
    "eq": {"eq": {"key": "region", "value": "emea"}},
    "in over scalars and lists": {"in": {"key": "region", "values": ["apac", "em_a"]}},
    "date range": {"range": {"key": "published", "gt": "2023-12-31", "lte": "2024-03-01"}},
    "not eq": {"not": {"eq": {"key": "region", "value": "emea"}}},
    "not range, or exists": {"or": [{"not": {"range": {"key": "published", "gte": "2024-06-01"}}},
                                    {"not": {"exists": {"key": "region"}}}]},
    "ne and in": {"and": [{"ne": {"key": "region", "value": "amer"}},
                          {"in": {"key": "status", "values": ["final"]}}]},
}


def _chunks() -> list[IndexedChunk]:
    rng = random.Random(3)
    chunks = []
    for i in range(70):
        metadata = {k: v for k, v in (("region", REGIONS[i % len(REGIONS)]),
                                      (rng.choice(["published", "published_date", "date"]), DATES[i % len(DATES)]),
                                      ("status", rng.choice(["final", "draft"]))) if v is not None or i % 2}
        chunks.append(IndexedChunk(id=f"d{i}#0", document_id=f"d{i}", title=f"t{i}", text=f"solar audit {i}",
                                   keywords=f"solar audit {i}", vector=[rng.uniform(-1, 1) for _ in range(DIM)],
                                   metadata=metadata))
    return chunks


def _found(store: VectorStore, name: str, rule: MetadataFilter | str) -> set[str]:
    dense = {h.document_id for h in store.dense_search(name, [1.0] * DIM, 100, filter_expr=rule)}
    keyword = {h.document_id for h in store.keyword_search(name, "solar", 100, filter_expr=rule)}
    assert dense == keyword, dense ^ keyword
    return dense


def test_eq_in_and_range_on_the_fields_return_the_rows_the_json_returns(tmp_path):
    store = VectorStore(str(tmp_path / "milvus.db"))
    store.ensure_collection("c_new", dimension=DIM)
    chunks = _chunks()
    store.upsert("c_new", chunks)
    assert {TERMS_FIELD, DAY_FIELD} <= store.fields("c_new")
    for label, raw in FILTERS.items():
        rule = MetadataFilter.model_validate(raw)
        written = store.expression("c_new", rule)
        assert "metadata[" not in written, (label, written)
        on_fields = _found(store, "c_new", rule)
        on_json = _found(store, "c_new", rule.expression())
        assert on_fields == on_json == {c.document_id for c in chunks if rule.matches(c.metadata)}, label
        assert 0 < len(on_fields) < len(chunks), label  # each case keeps some rows and drops others


def test_a_collection_made_before_the_fields_filters_on_its_json_until_a_new_generation(tmp_path):
    uri = str(tmp_path / "milvus.db")
    client = MilvusClient(uri=uri)
    create_collection(client, "c_old", DIM, plain_fields=False)
    client.close()
    store = VectorStore(uri)
    store.ensure_collection("c_old", dimension=DIM)
    chunks = _chunks()
    store.upsert("c_old", chunks)
    rule = MetadataFilter.model_validate(FILTERS["in over scalars and lists"])
    assert 'metadata["region"]' in store.expression("c_old", rule)
    before = _found(store, "c_old", rule)
    built = store.new_generation("c_old", dimension=DIM)  # what reindex does
    store.upsert(built, chunks)
    store.switch("c_old", built)
    assert "metadata[" not in store.expression("c_old", rule)
    assert _found(store, "c_old", rule) == before == {c.document_id for c in chunks if rule.matches(c.metadata)}
