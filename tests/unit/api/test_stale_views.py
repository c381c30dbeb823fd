"""Where a stale answer shows, through the embedded app (``app`` and ``client`` in tests/unit/conftest.py), its rows
written straight to its database: ``stale`` on the job, on a cached copy of it and on its conversation turn, and a
webhook that asks for ``job.stale``."""

from __future__ import annotations

import uuid

from agentsearch.pipeline.ingestion.cited import Cited, mark_deleted
from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.platform.tables.collections import DocumentRow
from agentsearch.pipeline.platform.tables.conversations import ConversationTurnRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.security.users import UserStore
from tests.support.api_checks import locs, new_collection


def test_a_stale_job_its_cached_copy_and_its_turn_say_which_document_and_how(app, client):
    db = app.state.services.db
    user_id = UserStore(db).authenticate(client.headers["Authorization"].removeprefix("Bearer "))
    collection = uuid.UUID(new_collection(client, "stale-views"))
    conversation = client.post("/v1/conversations", json={"title": "leave"}).json()["id"]
    job, copy = uuid.uuid4(), uuid.uuid4()
    with db.session() as s:
        s.add(DocumentRow(collection_id=collection, external_id="hr/leave", text="Thirty days.", status="indexed"))
        s.add(JobRow(id=job, user_id=user_id, collection_id=collection, query="How much leave?", status="running",
                     cache_key="k"))
    assert JobStore(db).succeed(str(job), {"answer": "Thirty days [1].", "complete": True,
                                           "sources": [{"document_id": "hr/leave", "title": "Leave", "score": 1}]},
                                [], {}, cited=[Cited(collection, "hr/leave", None)])
    with db.session() as s:
        JobStore(db).create(s, copy, user_id, collection, "How much leave?", request={}, deadline_s=60,
                            answered_from=s.get(JobRow, job))
        s.add(ConversationTurnRow(conversation_id=uuid.UUID(conversation), job_id=job, status="succeeded",
                                  question="How much leave?", standalone_query="How much leave?", answer="Thirty"))
    assert client.get(f"/v1/jobs/{job}").json()["stale"] is None
    with db.session() as s:
        assert mark_deleted(s, collection, "hr/leave") == 1
    for read in (job, copy):
        assert client.get(f"/v1/jobs/{read}").json()["stale"] == {"hr/leave": "deleted"}, read
    [turn] = client.get(f"/v1/conversations/{conversation}").json()["turns"]
    assert turn["stale"] == {"hr/leave": "deleted"}


def test_a_webhook_may_ask_for_job_stale_and_an_unknown_event_is_refused(client):
    # A public address as written: no name to resolve in a test.
    made = client.post("/v1/webhooks", json={"url": "https://93.184.216.34/stale",
                                             "events": ["job.succeeded", "job.stale"]})
    assert made.status_code == 201, made.text
    assert made.json()["events"] == ["job.succeeded", "job.stale"]
    refused = client.post("/v1/webhooks", json={"url": "https://93.184.216.34/x", "events": ["job.outdated"]})
    assert refused.status_code == 422 and locs(refused) == [["body", "events", 0]]
