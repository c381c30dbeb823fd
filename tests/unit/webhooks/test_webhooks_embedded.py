"""Completion webhooks in the embedded mode: the in-process worker consumes the webhooks queue, in threads of its
own, and a ticker of the API process stands in for beat's sweep. A receiver on 127.0.0.1, which this app's operator
allowed. The routes' own checks (URLs, how many webhooks a user may have) are tried here too."""

from __future__ import annotations

import json
import os
import time
import uuid

import pytest
from standardwebhooks import Webhook

from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.platform.db import utcnow
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.webhooks import WebhookDeliveryRow
from agentsearch.pipeline.security.users import UserStore
from tests.support.webhook_receiver import WebhookReceiver

MAX_WEBHOOKS = 6
# The threads of the embedded webhooks pool (agentsearch.worker.embedded.WEBHOOK_THREADS): a user's slow receivers hold
# them all.
WEBHOOK_THREADS = 4


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    from fastapi.testclient import TestClient

    from agentsearch.pipeline.platform.settings import get_settings
    from agentsearch.pipeline.services import reset_services, use_services

    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.upper().startswith("AGENTSEARCH_"):
                mp.delenv(name)
        mp.setenv("AGENTSEARCH_DATA_DIR", str(tmp_path_factory.mktemp("webhooks-embedded")))
        mp.setenv("AGENTSEARCH_EGRESS_ALLOW", json.dumps(["127.0.0.1"]))
        mp.setenv("AGENTSEARCH_WEBHOOK_BACKOFF_BASE_S", "0.1")
        mp.setenv("AGENTSEARCH_WEBHOOK_SWEEP_INTERVAL_S", "0.3")
        mp.setenv("AGENTSEARCH_WEBHOOK_MAX_PER_USER", str(MAX_WEBHOOKS))
        # Past the webhooks pool's threads: what keeps the job's steps going is that pool being apart, not the cap.
        mp.setenv("AGENTSEARCH_WEBHOOK_MAX_IN_FLIGHT_PER_USER", "8")
        # Slow receivers hold their attempts this long, far longer than the tests that use them take.
        mp.setenv("AGENTSEARCH_WEBHOOK_TIMEOUT_S", "60")
        get_settings.cache_clear()
        previous = use_services(None)
        reset_services()
        from agentsearch.api.app import create_app

        application = create_app()
        try:
            with TestClient(application) as http:
                user_id, key = UserStore(application.state.services.db).create(f"hooks-{uuid.uuid4().hex[:6]}")
                http.headers["Authorization"] = f"Bearer {key}"
                yield application, http, user_id
        finally:
            application.state.services.close()
            use_services(previous)
            get_settings.cache_clear()


def _ended_job(app, user_id, status: str) -> str:
    db = app.state.services.db
    job_id = uuid.uuid4()
    with db.session() as s:
        collection = CollectionRow(name=f"c-{uuid.uuid4().hex[:6]}", user_id=user_id, embedding_model="m")
        s.add(collection)
        s.flush()
        JobStore(db).create(s, job_id, user_id, collection.id, "q", request={}, deadline_s=600)
    if status == "failed":
        JobStore(db).fail(str(job_id), "boom")
    else:
        JobStore(db).cancel(str(job_id))
    return str(job_id)


def test_a_jobs_end_is_delivered_by_the_embedded_worker(embedded):
    app, http, user_id = embedded
    with WebhookReceiver() as receiver:
        receiver.fail_first["/hook"] = 1
        created = http.post("/v1/webhooks", json={"url": f"{receiver.url}/hook", "events": ["job.failed"]})
        assert created.status_code == 201, created.text
        job_id = _ended_job(app, user_id, "failed")
        _ended_job(app, user_id, "cancelled")  # not subscribed
        (got,) = receiver.wait_processed("/hook", 1, timeout_s=20)
        payload = Webhook(created.json()["secret"]).verify(got.body, got.headers)
        assert (payload["type"], payload["data"]["job_id"], payload["data"]["error"]) == ("job.failed", job_id, "boom")
        assert [r.status for r in receiver.received("/hook")] == [500, 200]


def test_a_delivery_nobody_enqueued_is_found_by_the_sweep(embedded):
    app, http, _user_id = embedded
    with WebhookReceiver() as receiver:
        hook = http.post("/v1/webhooks", json={"url": f"{receiver.url}/swept", "events": ["job.failed"]}).json()
        now = utcnow()
        with app.state.services.db.session() as s:  # as if the worker that ended the job died before enqueueing
            s.add(WebhookDeliveryRow(webhook_id=uuid.UUID(hook["id"]), job_id=uuid.uuid4(), event="job.failed",
                                     message_id=f"msg_{uuid.uuid4().hex}", payload={"type": "job.failed"},
                                     status="pending", attempts=0, next_attempt_at=now, created_at=now))
        started = time.monotonic()
        receiver.wait_processed("/swept", 1, timeout_s=10)
        assert time.monotonic() - started < 5
        (row,) = http.get(f"/v1/webhooks/{hook['id']}/deliveries").json()
        assert row["status"] in ("pending", "delivered")  # recorded just after the receiver answered


def _new_user(app) -> tuple[uuid.UUID, dict[str, str]]:
    user_id, key = UserStore(app.state.services.db).create(f"hooks-{uuid.uuid4().hex[:6]}")
    return user_id, {"Authorization": f"Bearer {key}"}


def test_slow_receivers_never_hold_up_the_jobs_steps(embedded):
    from agentsearch.worker.agentic_tasks import run_due_profile_sets

    app, http, _ = embedded
    user_id, headers = _new_user(app)
    with WebhookReceiver() as receiver:
        receiver.trickle["/slow"] = 0.2
        for _ in range(MAX_WEBHOOKS):
            created = http.post("/v1/webhooks", json={"url": f"{receiver.url}/slow", "events": ["job.failed"]},
                                headers=headers)
            assert created.status_code == 201, created.text
        _ended_job(app, user_id, "failed")
        receiver.wait_trickling("/slow", WEBHOOK_THREADS)  # every thread of the webhooks pool held
        # A task of the job's steps' queue runs meanwhile, not after the slow receivers.
        assert run_due_profile_sets.delay().get(timeout=30, disable_sync_subtasks=False) == []
        assert len(receiver.trickling("/slow")) == WEBHOOK_THREADS


def test_a_user_has_at_most_the_webhooks_the_operator_allows(embedded):
    app, http, _ = embedded
    _, headers = _new_user(app)
    body = {"url": "http://127.0.0.1:9/hook", "events": ["job.failed"]}
    made = [http.post("/v1/webhooks", json=body, headers=headers) for _ in range(MAX_WEBHOOKS)]
    assert [m.status_code for m in made] == [201] * MAX_WEBHOOKS
    refused = http.post("/v1/webhooks", json=body, headers=headers)
    assert refused.status_code == 409, refused.text
    assert refused.json()["detail"] == (f"you have {MAX_WEBHOOKS} webhooks, the most one user may have; delete one "
                                        "before adding another")
    assert len(http.get("/v1/webhooks", headers=headers).json()) == MAX_WEBHOOKS  # nothing written
    assert http.delete(f"/v1/webhooks/{made[0].json()['id']}", headers=headers).status_code == 204
    assert http.post("/v1/webhooks", json=body, headers=headers).status_code == 201


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/a\tb", "http://127.0.0.1:9/a\r\nX-Injected: 1",
                                 "http://127.0.0.1:9/a\nb"])
def test_a_url_with_a_tab_or_a_line_break_is_refused_naming_the_field(embedded, url):
    app, http, _ = embedded
    _, headers = _new_user(app)
    refused = http.post("/v1/webhooks", json={"url": url, "events": ["job.failed"]}, headers=headers)
    assert refused.status_code == 422, refused.text
    (detail,) = refused.json()["detail"]
    assert detail["loc"] == ["body", "url"] and "control character" in detail["msg"]
    assert http.get("/v1/webhooks", headers=headers).json() == []
    hook = http.post("/v1/webhooks", json={"url": "http://127.0.0.1:9/ok", "events": ["job.failed"]},
                     headers=headers).json()
    moved = http.patch(f"/v1/webhooks/{hook['id']}", json={"url": url}, headers=headers)
    assert moved.status_code == 422 and moved.json()["detail"][0]["loc"] == ["body", "url"]
    assert http.get(f"/v1/webhooks/{hook['id']}", headers=headers).json()["url"] == "http://127.0.0.1:9/ok"
