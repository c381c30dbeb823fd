"""Feedback on answers through the embedded app (``app`` and ``client`` in tests/unit/conftest.py), its jobs written
straight to its database: a rating stored once per user and thing rated, refusals naming the field, 404 for a key
that cannot read the job, a collection's feedback by week for its admins only, the Prometheus counters per collection,
and a flood refused by the caller's rate limit."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from agentsearch.pipeline.job.feedback import week_of
from agentsearch.pipeline.platform.db import utcnow
from agentsearch.pipeline.platform.tables.answers import FeedbackRow
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.security.quotas import LimitOverrides, QuotaStore
from agentsearch.pipeline.security.users import UserStore
from tests.support.api_checks import locs, new_collection

SOURCES = [{"document_id": "hr/leave", "title": "Leave", "score": 0.9},
           {"document_id": "canteen", "title": "Canteen", "score": 0.5}]


def _job(app, user_id: uuid.UUID, collection_id: str, status: str = "succeeded") -> str:
    job = uuid.uuid4()
    with app.state.services.db.session() as s:
        s.add(JobRow(id=job, user_id=user_id, collection_id=uuid.UUID(collection_id), query="How much leave?",
                     status=status, response={"answer": "Thirty days [1].", "sources": SOURCES}
                     if status == "succeeded" else None))
    return str(job)


def _user_of(app, client) -> uuid.UUID:
    user_id = UserStore(app.state.services.db).authenticate(client.headers["Authorization"].removeprefix("Bearer "))
    assert user_id is not None
    return user_id


@pytest.fixture(scope="module")
def team(app, client):
    """A team of the client's user (admin) with a collection, a viewer and an outsider with keys."""
    store = UserStore(app.state.services.db)
    keys = {role: store.create(f"fb-{role}-{uuid.uuid4().hex[:6]}") for role in ("viewer", "outsider")}
    team_id = client.post("/v1/teams", json={"name": f"t-{uuid.uuid4().hex[:6]}"}).json()["id"]
    assert client.put(f"/v1/teams/{team_id}/members/{keys['viewer'][0]}", json={"role": "viewer"}).status_code == 200
    shared = client.post("/v1/collections", json={"name": "feedback-handbook", "team_id": team_id}).json()["id"]
    return {"collection": shared, **{role: {"Authorization": f"Bearer {key}"} for role, (_, key) in keys.items()},
            **{f"{role}_id": user_id for role, (user_id, _) in keys.items()}}


def _counter(client, collection_id: str, rating: str) -> float:
    text = client.get("/metrics").text
    prefix = f'agentsearch_answer_feedback_total{{collection="{collection_id}",rating="{rating}"}} '
    return next((float(line.removeprefix(prefix)) for line in text.splitlines() if line.startswith(prefix)), 0.0)


def test_a_rating_is_stored_once_per_user_and_thing_and_counted_per_collection(app, client):
    collection = new_collection(client, "feedback")
    job = _job(app, _user_of(app, client), collection)
    first = client.post(f"/v1/jobs/{job}/feedback", json={"rating": "up"})
    assert first.status_code == 201, first.text
    assert first.json() == {"job_id": job, "rating": "up", "comment": None, "source": None}
    assert client.post(f"/v1/jobs/{job}/feedback", json={"rating": "up"}).status_code == 200  # the same again
    changed = client.post(f"/v1/jobs/{job}/feedback", json={"rating": "down", "comment": " cites last year "})
    assert changed.status_code == 201 and changed.json()["comment"] == "cites last year"
    on_source = client.post(f"/v1/jobs/{job}/feedback", json={"rating": "down", "source": "hr/leave"})
    assert on_source.status_code == 201 and on_source.json()["source"] == "hr/leave"
    with app.state.services.db.session() as s:
        rows = s.scalars(select(FeedbackRow).where(FeedbackRow.job_id == uuid.UUID(job))).all()
        assert sorted((r.source, r.rating) for r in rows) == [("", "down"), ("hr/leave", "down")]
    assert (_counter(client, collection, "up"), _counter(client, collection, "down")) == (1.0, 2.0)

    weekly = client.get(f"/v1/collections/{collection}/feedback", params={"weeks": 3})
    assert weekly.status_code == 200, weekly.text
    weeks = weekly.json()["weeks"]
    assert [w["week"] for w in weeks] == [week_of(utcnow() - timedelta(weeks=n)) for n in (2, 1, 0)]
    assert weeks[-1] | {"week": None} == {"week": None, "up": 0, "down": 2, "answer_up": 0, "answer_down": 1}
    assert weeks[0]["up"] == weeks[0]["down"] == 0
    items = weekly.json()["items"]
    assert {(i["source"], i["comment"]) for i in items} == {(None, "cites last year"), ("hr/leave", None)}
    assert all(i["query"] == "How much leave?" for i in items)


def test_bad_feedback_is_refused_naming_the_field_and_writes_nothing(app, client):
    collection = new_collection(client, "feedback-bad")
    user_id = _user_of(app, client)
    job, running = _job(app, user_id, collection), _job(app, user_id, collection, status="running")
    for body, field in (({"rating": "meh"}, "rating"), ({}, "rating"), ({"rating": "up", "source": "elsewhere"},
                                                                          "source"),
                        ({"rating": "up", "comment": "x" * 2001}, "comment"), ({"rating": "up", "stars": 5}, "stars")):
        refused = client.post(f"/v1/jobs/{job}/feedback", json=body)
        assert refused.status_code == 422 and locs(refused) == [["body", field]], (body, refused.text)
    not_yet = client.post(f"/v1/jobs/{running}/feedback", json={"rating": "up"})
    assert not_yet.status_code == 409 and "no answer to rate yet" in not_yet.json()["detail"]
    assert client.post(f"/v1/jobs/{uuid.uuid4()}/feedback", json={"rating": "up"}).status_code == 404
    with app.state.services.db.session() as s:
        assert s.scalar(select(func.count()).select_from(FeedbackRow)
                        .where(FeedbackRow.collection_id == uuid.UUID(collection))) == 0
    weeks = client.get(f"/v1/collections/{collection}/feedback", params={"weeks": 0})
    assert weeks.status_code == 422 and locs(weeks) == [["query", "weeks"]]


def test_a_key_that_cannot_read_the_job_gets_404_and_only_admins_read_a_collections_feedback(app, client, team):
    job = _job(app, _user_of(app, client), team["collection"])
    outsider, viewer = team["outsider"], team["viewer"]
    hidden = client.post(f"/v1/jobs/{job}/feedback", headers=outsider, json={"rating": "down"})
    assert hidden.status_code == 404 and hidden.json()["detail"] == f"job {job} not found"
    # A member who reads the job rates it; the collection's feedback is its admins'.
    assert client.post(f"/v1/jobs/{job}/feedback", headers=viewer, json={"rating": "down"}).status_code == 201
    refused = client.get(f"/v1/collections/{team['collection']}/feedback", headers=viewer)
    assert refused.status_code == 403 and "needs the role 'admin'" in refused.json()["detail"]
    assert client.get(f"/v1/collections/{team['collection']}/feedback", headers=outsider).status_code == 404
    weekly = client.get(f"/v1/collections/{team['collection']}/feedback").json()
    assert weekly["weeks"][-1]["down"] == 1


def test_a_flood_of_feedback_is_refused_by_the_callers_rate_limit(app, client):
    name = f"fb-flood-{uuid.uuid4().hex[:6]}"
    user_id, key = UserStore(app.state.services.db).create(name)
    QuotaStore(app.state.services.db).set_overrides(name, LimitOverrides(reads_per_minute=3))
    with app.state.services.db.session() as s:
        own = CollectionRow(user_id=user_id, name="flooded", embedding_model="m")
        s.add(own)
        s.flush()
        collection = str(own.id)
    job = _job(app, user_id, collection)
    headers = {"Authorization": f"Bearer {key}"}
    answers = [client.post(f"/v1/jobs/{job}/feedback", headers=headers, json={"rating": rating})
               for rating in ("up", "down", "up", "down")]
    assert [a.status_code for a in answers] == [201, 201, 201, 429]
    assert int(answers[-1].headers["Retry-After"]) >= 1
    with app.state.services.db.session() as s:
        assert s.scalar(select(FeedbackRow.rating).where(FeedbackRow.job_id == uuid.UUID(job))) == "up"
