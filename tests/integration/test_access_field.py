"""The document groups' field on real Milvus Lite: a group-restricted search written on ``access_groups`` keeps exactly
the chunks the JSON clause keeps, follows a document whose groups change, and a collection made before the field
keeps answering (on its JSON) until ``reindex``'s new generation brings the field.

Each case runs on an embedded Milvus Lite database of its own (the store as an embedded worker uses it): no server.
"""

from __future__ import annotations

import random

import pytest
from pymilvus import MilvusClient

from agentsearch.pipeline.retrieval.access_field import ACCESS_FIELD, ACCESS_KEY
from agentsearch.pipeline.retrieval.collection_schema import create_collection
from agentsearch.pipeline.retrieval.filters import MetadataFilter
from agentsearch.pipeline.retrieval.stored_chunks import IndexedChunk
from agentsearch.pipeline.retrieval.vector_store import VectorStore, generation_name
from agentsearch.pipeline.security.document_access import access_filter, restricted

pytestmark = pytest.mark.integration

DIM = 8
TEAM = "5f0c1a2b-0000-4000-8000-00000000abcd"
HR, LEGAL, OPS = f"{TEAM}:hr", f"{TEAM}:legal_team", f"{TEAM}:legalXteam"  # "_" must not match "X"


def _chunks(seed: int = 0) -> list[IndexedChunk]:
    """40 chunks: every fifth restricted to hr, every seventh to legal_team (both for 35), one to legalXteam."""
    rng = random.Random(seed)
    chunks = []
    for i in range(40):
        groups = [g for g, step in ((HR, 5), (LEGAL, 7)) if i % step == 0]
        if i == 3:
            groups = [OPS]
        metadata = {"region": "emea" if i % 2 else "apac", **({ACCESS_KEY: groups} if groups else {})}
        chunks.append(IndexedChunk(id=f"d{i}#0", document_id=f"d{i}", title=f"t{i}", text=f"solar panel {i}",
                                   keywords=f"solar panel {i}", vector=[rng.uniform(-1, 1) for _ in range(DIM)],
                                   metadata=metadata))
    return chunks


def _visible(chunks: list[IndexedChunk], rule: MetadataFilter) -> set[str]:
    return {c.document_id for c in chunks if rule.matches(c.metadata)}


def _found(store: VectorStore, name: str, rule: MetadataFilter) -> set[str]:
    dense = {h.document_id for h in store.dense_search(name, [1.0] * DIM, 100, filter_expr=rule)}
    keyword = {h.document_id for h in store.keyword_search(name, "solar", 100, filter_expr=rule)}
    assert dense == keyword, (dense ^ keyword)
    return dense


def _old_collection(uri: str, name: str) -> None:
    """A collection as ``VectorStore`` made them before the groups' field (and the sentences' one)."""
    client = MilvusClient(uri=uri)
    create_collection(client, name, DIM, plain_fields=False)
    client.close()


CASES = {
    "no groups held": access_filter([]),
    "hr": access_filter([HR]),
    "legal_team": access_filter([LEGAL]),
    "hr and legalXteam": access_filter([HR, OPS]),
    "hr, with a caller's filter": MetadataFilter.model_validate(restricted({"eq": {"key": "region", "value": "emea"}},
                                                                           [HR])),
}


def test_a_new_collection_answers_group_clauses_on_the_field_with_the_json_clauses_results(tmp_path):
    store = VectorStore(str(tmp_path / "milvus.db"))
    store.ensure_collection("c_new", dimension=DIM)
    chunks = _chunks()
    store.upsert("c_new", chunks)
    assert ACCESS_FIELD in store.fields("c_new")
    for label, rule in CASES.items():
        written = store.expression("c_new", rule)
        assert ACCESS_FIELD in written and "_access_groups" not in written, (label, written)
        assert _found(store, "c_new", rule) == _visible(chunks, rule), label
    # The same rows, as the JSON clause keeps them (what every collection did before the field).
    for label, rule in CASES.items():
        hits = store.dense_search("c_new", [1.0] * DIM, 100, filter_expr=rule.expression())
        assert {h.document_id for h in hits} == _visible(chunks, rule), label


def test_a_documents_changed_groups_move_its_chunks_in_or_out_of_a_members_search(tmp_path):
    store = VectorStore(str(tmp_path / "milvus.db"))
    store.ensure_collection("c_move", dimension=DIM)
    chunks = _chunks()
    store.upsert("c_move", chunks)
    outside = access_filter([LEGAL])
    assert "d10" not in _found(store, "c_move", outside)  # restricted to hr
    public = next(c for c in chunks if c.document_id == "d10")
    public.metadata = {k: v for k, v in public.metadata.items() if k != ACCESS_KEY}
    store.replace_documents("c_move", ["d10"], [public])
    assert "d10" in _found(store, "c_move", outside)
    moved = next(c for c in chunks if c.document_id == "d1")
    moved.metadata = {**moved.metadata, ACCESS_KEY: [HR]}
    store.replace_documents("c_move", ["d1"], [moved])
    assert "d1" not in _found(store, "c_move", outside)
    assert "d1" in _found(store, "c_move", access_filter([HR]))


def test_a_collection_made_before_the_field_answers_on_its_json_until_a_new_generation_brings_the_field(tmp_path):
    uri = str(tmp_path / "milvus.db")
    _old_collection(uri, "c_old")
    store = VectorStore(uri)
    store.ensure_collection("c_old", dimension=DIM)
    chunks = _chunks(seed=1)
    store.upsert("c_old", chunks)
    assert ACCESS_FIELD not in store.fields("c_old")
    for label, rule in CASES.items():
        assert "_access_groups" in store.expression("c_old", rule), label
        assert _found(store, "c_old", rule) == _visible(chunks, rule), label
    # What reindex does: a new generation, the chunks written to it, the alias moved.
    built = store.new_generation("c_old", dimension=DIM)
    assert built == generation_name("c_old", 2)
    store.upsert(built, chunks)
    store.switch("c_old", built)
    assert ACCESS_FIELD in store.fields("c_old")
    for label, rule in CASES.items():
        assert ACCESS_FIELD in store.expression("c_old", rule), label
        assert _found(store, "c_old", rule) == _visible(chunks, rule), label
