"""Submitting a search job without HTTP (``agentsearch.pipeline.job.submit``): a refusal says where and why and writes
nothing, an Idempotency-Key answers with its job, an identical complete job answers from its stored response, and every
job row comes from ``JobStore`` (SQLite in a temporary directory, fake Redis for the metrics)."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import func, select

from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.job.request import SearchRequest
from agentsearch.pipeline.job.submit import audit_search, submit_job
from agentsearch.pipeline.platform.tables.audit import AuditEventRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID
from agentsearch.pipeline.refusal import Refusal
from agentsearch.pipeline.security.audit import Actor
from tests.support import submission

MISSING = uuid.UUID("6b0f9a52-1d4e-4c8a-9a55-0e1c2f3d4b5a")


services, collection_id = submission.services, submission.collection_id


def jobs(services) -> int:
    with services.db.session() as s:
        return s.scalar(select(func.count()).select_from(JobRow))


def submit(services, key: str | None = None, **body):
    return submit_job(services, DEFAULT_USER_ID, SearchRequest(**body), key)


@pytest.mark.parametrize(("body", "status", "loc"), [
    ({"query": "   "}, 422, ("body", "query")),
    ({"query": "Q4 revenue", "top_k": 51}, 422, ("body", "top_k")),
    ({"query": "Q4 revenue", "agents": ["no_such_agent"]}, 422, ("body", "agents", 0)),
    ({"query": "Q4 revenue", "search": {"top_k": 3}}, 422, ("body", "search", "top_k")),
    ({"query": "Q4 revenue", "iterative": {"target": 2}}, 422, ("body", "iterative")),
    ({"query": "Q4 revenue", "also_search": [MISSING]}, 422, ("body", "also_search", 0)),
])
def test_a_refusal_names_the_field_and_nothing_is_written(services, collection_id, body, status, loc):
    with pytest.raises(Refusal) as refused:
        submit(services, collection_id=collection_id, **body)
    assert refused.value.status == status and refused.value.errors[0]["loc"] == loc
    assert jobs(services) == 0


def test_a_missing_collection_is_a_404_as_reading_it_would_be(services):
    with pytest.raises(Refusal) as refused:
        submit(services, collection_id=MISSING, query="Q4 revenue")
    assert (refused.value.status, refused.value.detail) == (404, f"collection {MISSING} not found")
    assert refused.value.errors is None


def test_a_new_job_is_queued_with_its_first_state_for_the_caller_to_enqueue(services, collection_id):
    submitted = submit(services, collection_id=collection_id, query="  Q4 revenue ", top_k=3)
    assert (submitted.status, submitted.cached, submitted.cache_hit, submitted.replayed) == ("queued", False, False,
                                                                                              False)
    assert submitted.state.query == "Q4 revenue" and submitted.state.top_k == 3
    initial, snapshot = JobStore(services.db).initial_state(str(submitted.job_id))
    assert initial == submitted.state and snapshot == []


def test_the_same_idempotency_key_answers_with_the_same_job(services, collection_id):
    first = submit(services, "retry-7", collection_id=collection_id, query="Q4 revenue")
    again = submit(services, "retry-7", collection_id=collection_id, query="Q4 revenue")
    assert again.job_id == first.job_id and again.replayed and again.state is None
    assert jobs(services) == 1


def test_an_identical_request_is_answered_from_a_complete_job_and_points_at_it(services, collection_id, redis_client):
    first = submit(services, collection_id=collection_id, query="Q4 revenue")
    assert JobStore(services.db).succeed(str(first.job_id), {"answer": "412 million [1]", "complete": True}, [], {})
    hit = submit(services, collection_id=collection_id, query="Q4 revenue")
    assert (hit.status, hit.cached, hit.cache_hit, hit.state) == ("succeeded", True, True, None)
    with services.db.session() as s:
        row = s.get(JobRow, hit.job_id)
        assert row.cached_from == first.job_id and row.response["cached_from"] == str(first.job_id)
        assert row.response["job_id"] == str(hit.job_id) and row.initial_state is None
    fresh = submit(services, collection_id=collection_id, query="Q4 revenue", use_cache=False)
    assert fresh.state is not None  # asked not to: a new job
    assert redis_client.hgetall("agentsearch:metrics:cache") == {b'["job","miss"]': b"1"}  # the API counts hits


def test_an_incomplete_answer_is_never_reused(services, collection_id):
    first = submit(services, collection_id=collection_id, query="Q4 revenue")
    JobStore(services.db).succeed(str(first.job_id), {"answer": "partial", "complete": False}, [], {})
    assert submit(services, collection_id=collection_id, query="Q4 revenue").cache_hit is False


def test_a_job_taken_back_leaves_no_row(services, collection_id):
    submitted = submit(services, collection_id=collection_id, query="Q4 revenue")
    JobStore(services.db).discard(str(submitted.job_id))
    assert jobs(services) == 0


def test_an_answer_from_an_earlier_job_is_audited_in_its_own_transaction_and_a_new_job_is_left_to_the_caller(
        services, collection_id):
    actor = Actor(DEFAULT_USER_ID, "as_test1234", "req-1", "127.0.0.1")
    body = SearchRequest(collection_id=collection_id, query="Q4 revenue")
    first = submit_job(services, DEFAULT_USER_ID, body, "retry-7", actor=actor)
    assert first.audited is False  # on the queues first: the caller writes its row (a job taken back has none)
    with services.db.session() as s:
        audit_search(s, actor, body, first)
    JobStore(services.db).succeed(str(first.job_id), {"answer": "412 million [1]", "complete": True}, [], {})
    replayed = submit_job(services, DEFAULT_USER_ID, body, "retry-7", actor=actor)
    hit = submit_job(services, DEFAULT_USER_ID, body, actor=actor)
    assert replayed.audited and hit.audited and hit.cache_hit
    with services.db.session() as s:
        rows = s.scalars(select(AuditEventRow).order_by(AuditEventRow.id)).all()
        assert [(r.action, r.target_id, r.details["cache_hit"], r.details["replayed"], r.key_prefix, r.request_id)
                for r in rows] == [("search", str(first.job_id), False, False, "as_test1234", "req-1"),
                                   ("search", str(first.job_id), False, True, "as_test1234", "req-1"),
                                   ("search", str(hit.job_id), True, False, "as_test1234", "req-1")]
        assert rows[-1].collection_id == collection_id and rows[-1].details["query"] == "Q4 revenue"
    assert submit_job(services, DEFAULT_USER_ID, body).audited is False  # without an actor, nothing is recorded
