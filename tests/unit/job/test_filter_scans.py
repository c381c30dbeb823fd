"""Bad input at scale: a filter Milvus can only answer by scanning every chunk's metadata is refused with 422 over
a collection past ``max_scan_chunks`` (naming the clause), and a collection holding ``max_collection_chunks`` refuses
new documents with 413, storing nothing (in-process app, SQLite)."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import func, select

from agentsearch.pipeline.job.filter_scans import refuse_scanning_filter, scanning_clause
from agentsearch.pipeline.platform.tables.collections import DocumentRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.refusal import Refusal
from agentsearch.pipeline.security.quotas import check_chunk_limit, chunks_stored

NUMERIC = {"and": [{"eq": {"key": "region", "value": "emea"}},
                   {"not": {"or": [{"exists": {"key": "x"}}, {"range": {"key": "pages", "gt": 2}}]}}]}


def _indexed(s, collection_id: uuid.UUID, chunks: int, name: str = "big") -> None:
    s.add(DocumentRow(collection_id=collection_id, external_id=name, text="t", status="indexed", chunks=chunks))


@pytest.mark.parametrize(("raw", "where"), [
    ({"eq": {"key": "region", "value": "emea"}}, None),
    ({"not": {"and": [{"in": {"key": "tags", "values": ["a"]}},
                      {"range": {"key": "published", "gte": "2024-01-01"}}]}}, None),  # `not` alone scans nothing
    ({"ne": {"key": "region", "value": "emea"}}, None),
    (NUMERIC, ("and", 1, "not", "or", 1, "range")),
    ({"eq": {"key": "public", "value": True}}, ("eq",)),
    ({"range": {"key": "date", "gte": "2024-01-01"}}, ("range",)),  # a date range on a key other than published
])
def test_the_clause_that_scans_is_found_by_its_path(raw, where):
    assert scanning_clause(raw) == where


def test_a_scanning_filter_is_refused_only_past_the_limit_and_names_its_clause(migrated_db, collection_id):
    with migrated_db.session() as s:
        _indexed(s, collection_id, 20_000)
        _indexed(s, collection_id, 5_000, "small")
        s.add(DocumentRow(collection_id=collection_id, external_id="pending", text="t"))  # no chunks yet
    with migrated_db.session() as s:
        assert chunks_stored(s, [collection_id]) == 25_000
        refuse_scanning_filter(s, NUMERIC, [collection_id], 25_000)  # at the limit: answered
        refuse_scanning_filter(s, {"eq": {"key": "region", "value": "emea"}}, [collection_id], 10)  # indexed
        with pytest.raises(Refusal) as refused:
            refuse_scanning_filter(s, NUMERIC, [collection_id], 24_999)
    assert refused.value.status == 422 and "25,000 chunks" in refused.value.detail
    assert refused.value.errors[0]["loc"] == ("body", "filter", "and", 1, "not", "or", 1, "range")


def test_a_collection_at_its_chunk_limit_refuses_new_documents_but_not_replacements(migrated_db, collection_id):
    with migrated_db.session() as s:
        _indexed(s, collection_id, 900)
    with migrated_db.session() as s:
        check_chunk_limit(s, collection_id, adding=3, limit=901)
        check_chunk_limit(s, collection_id, adding=0, limit=900)  # replacing stored documents adds none
        with pytest.raises(Refusal) as refused:
            check_chunk_limit(s, collection_id, adding=1, limit=900)
    assert refused.value.status == 413 and "900 chunks" in refused.value.detail


def test_the_api_refuses_both_before_writing_anything(app, client):
    collection_id = client.post("/v1/collections", json={"name": f"big-{uuid.uuid4().hex[:6]}"}).json()["id"]
    settings = app.state.services.settings
    with app.state.services.db.session() as s:
        _indexed(s, uuid.UUID(collection_id), max(settings.max_scan_chunks, settings.max_collection_chunks))
        jobs_before = s.scalar(select(func.count()).select_from(JobRow))
    refused = client.post("/v1/search", json={"collection_id": collection_id, "query": "audits", "filter": NUMERIC})
    assert refused.status_code == 422, refused.text
    assert refused.json()["detail"][0]["loc"] == ["body", "filter", "and", 1, "not", "or", 1, "range"]
    assert "reading every chunk's metadata" in refused.json()["detail"][0]["msg"]
    full = client.post(f"/v1/collections/{collection_id}/documents",
                       json={"documents": [{"id": "new", "title": "t", "text": "more"}]})
    assert full.status_code == 413, full.text
    assert "AGENTSEARCH_MAX_COLLECTION_CHUNKS" in full.json()["detail"]
    with app.state.services.db.session() as s:
        assert s.scalar(select(func.count()).select_from(JobRow)) == jobs_before
        assert chunks_stored(s, [uuid.UUID(collection_id)]) == max(settings.max_scan_chunks,
                                                                  settings.max_collection_chunks)
        assert s.scalar(select(func.count()).select_from(DocumentRow)
                        .where(DocumentRow.collection_id == uuid.UUID(collection_id))) == 1
