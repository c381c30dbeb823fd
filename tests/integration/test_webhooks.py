"""Completion webhooks on the real stack, delivered to a receiver this test runs on 127.0.0.1.

The suite's stack keeps the egress guard's defaults (127.0.0.1 refused), so this module adds an API process and a
thread-pool worker on the ``webhooks`` queue of its own, started as an operator who allowed 127.0.0.1 would start
them (``AGENTSEARCH_EGRESS_ALLOW``), with a short retry schedule, a few threads and a cap of two attempts out per
user; jobs still run on the suite's worker, and their ends are written and enqueued there. The suite's own API
answers the registrations that must be refused.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid

import httpx
import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from agentsearch.devstack.ingest import ingest_through_api
from tests.integration.conftest import extra_api_and_worker, use_agents, wait_job
from tests.support.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.integration

EVENTS = ["job.succeeded", "job.failed", "job.cancelled"]
RETRY_WINDOW_S = 6
# One attempt's deadline, in all; the webhooks worker's threads; one user's attempts out at once.
TIMEOUT_S = 10
THREADS = 4
IN_FLIGHT = 2


@pytest.fixture(scope="module")
def receiver():
    with WebhookReceiver() as running:
        yield running


@pytest.fixture(scope="module")
def allowed_api(stack, tmp_path_factory):
    """An API and a webhooks worker that may reach 127.0.0.1, on the suite's database and broker; the API's URL."""
    workdir = tmp_path_factory.mktemp("webhooks")
    env = {**stack.env, "AGENTSEARCH_EGRESS_ALLOW": json.dumps(["127.0.0.1"]),
           "AGENTSEARCH_WEBHOOK_BACKOFF_BASE_S": "0.2", "AGENTSEARCH_WEBHOOK_BACKOFF_MAX_S": "1",
           "AGENTSEARCH_WEBHOOK_RETRY_WINDOW_S": str(RETRY_WINDOW_S), "AGENTSEARCH_WEBHOOK_TIMEOUT_S": str(TIMEOUT_S),
           "AGENTSEARCH_WEBHOOK_MAX_IN_FLIGHT_PER_USER": str(IN_FLIGHT), "AGENTSEARCH_WORKER_PRELOAD_EMBEDDER": "false"}
    with extra_api_and_worker(workdir, env, queues="webhooks", concurrency=THREADS, name="webhooks") as url:
        yield url


@pytest.fixture(scope="module")
def user(stack):
    """A user of its own with a one-document collection: no other test's job ends reach this test's webhooks."""
    key = stack.create_user(f"hooks-{uuid.uuid4().hex[:6]}")
    documents = [{"id": "d1", "title": "Tides", "text": "Tidal power in the Bay of Fundy reaches 16 metres."}]
    with stack.http(key) as http:
        collection_id = ingest_through_api(http, "hooked", documents, timeout_s=60)
    return key, collection_id


def client(url: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {key}"})


def register(http: httpx.Client, url: str, events=EVENTS) -> dict:
    created = http.post("/v1/webhooks", json={"url": url, "events": events, "description": "test"})
    assert created.status_code == 201, created.text
    hook = created.json()
    assert hook["secret"].startswith("whsec_") and hook["status"] == "active"
    return hook


def run_job(http: httpx.Client, collection_id: str, **extra) -> dict:
    response = http.post("/v1/search", json={"collection_id": collection_id, "query": f"tidal {uuid.uuid4().hex[:6]}",
                                             "agents": [], "use_cache": False, **extra})
    assert response.status_code == 202, response.text
    return wait_job(http, response.json()["job_id"])


def deliveries(http: httpx.Client, hook_id: str) -> list[dict]:
    response = http.get(f"/v1/webhooks/{hook_id}/deliveries")
    assert response.status_code == 200, response.text
    return response.json()


def wait_delivery(http: httpx.Client, hook_id: str, status: str, timeout_s: float = 30) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        found = deliveries(http, hook_id)
        if found and found[0]["status"] == status:
            return found[0]
        assert time.monotonic() < deadline, f"no {status} delivery: {found}"
        time.sleep(0.2)


def test_a_finished_job_is_delivered_signed_with_the_webhooks_secret(allowed_api, user, receiver):
    key, collection_id = user
    with client(allowed_api, key) as http:
        hook = register(http, f"{receiver.url}/done")
        listed = http.get("/v1/webhooks").json()
        assert [h["id"] for h in listed] == [hook["id"]] and "secret" not in listed[0]
        assert "secret" not in http.get(f"/v1/webhooks/{hook['id']}").json()
        job = run_job(http, collection_id)
        assert job["status"] == "succeeded"
        (got,) = receiver.wait_processed("/done", 1)
    payload = Webhook(hook["secret"]).verify(got.body, got.headers)
    assert payload["type"] == "job.succeeded"
    assert payload["data"]["job_id"] == job["job_id"] and payload["data"]["status"] == "succeeded"
    assert payload["data"]["collection_id"] == collection_id
    assert payload["data"]["links"]["job"] == f"/v1/jobs/{job['job_id']}"
    assert "response" not in payload["data"] and "answer" not in json.dumps(payload)
    assert got.headers["webhook-signature"].startswith("v1,")
    with pytest.raises(WebhookVerificationError):
        Webhook("whsec_" + "A" * 43 + "=").verify(got.body, got.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(hook["secret"]).verify(got.body.replace(b"succeeded", b"failed"), got.headers)
    with client(allowed_api, key) as http:
        # Rotated: later deliveries verify with the new secret only.
        rotated = http.post(f"/v1/webhooks/{hook['id']}/rotate-secret")
        assert rotated.status_code == 200 and rotated.json()["secret"] != hook["secret"]
        run_job(http, collection_id)
        second = receiver.wait_processed("/done", 2)[1]
        Webhook(rotated.json()["secret"]).verify(second.body, second.headers)
        with pytest.raises(WebhookVerificationError):
            Webhook(hook["secret"]).verify(second.body, second.headers)
        assert http.delete(f"/v1/webhooks/{hook['id']}").status_code == 204


def test_a_receiver_that_fails_then_recovers_gets_each_delivery_once(allowed_api, user, receiver):
    key, collection_id = user
    receiver.fail_first["/flaky"] = 3
    with client(allowed_api, key) as http:
        hook = register(http, f"{receiver.url}/flaky", events=["job.succeeded"])
        job = run_job(http, collection_id)
        (processed,) = receiver.wait_processed("/flaky", 1)
        delivery = wait_delivery(http, hook["id"], "delivered")
        requests = receiver.received("/flaky")
        assert [r.status for r in requests] == [500, 500, 500, 200]
        assert {r.headers["webhook-id"] for r in requests} == {delivery["webhook_message_id"]}
        assert delivery["job_id"] == job["job_id"] and delivery["event"] == "job.succeeded"
        assert [(a["number"], a["status_code"]) for a in delivery["attempts"]] == [(1, 500), (2, 500), (3, 500),
                                                                                   (4, 200)]
        assert all(a["duration_ms"] >= 0 and a["started_at"] for a in delivery["attempts"])
        assert delivery["attempts"][0]["error"] == "the receiver answered HTTP 500"
        # Backoff: each wait at least half its doubling nominal one (0.1-0.2 s, then 0.2-0.4 s, then 0.4-0.8 s).
        gaps = [b.at - a.at for a, b in itertools.pairwise(requests)]
        assert gaps[0] >= 0.1 and gaps[1] >= 0.2 and gaps[2] >= 0.4, gaps

        # A manual retry: a new attempt under the same webhook-id, which the receiver drops as a repeat.
        retried = http.post(f"/v1/webhooks/{hook['id']}/deliveries/{delivery['id']}/retry")
        assert retried.status_code == 202, retried.text
        deadline = time.monotonic() + 20
        while len(receiver.received("/flaky")) < 5:
            assert time.monotonic() < deadline, "the manual retry never arrived"
            time.sleep(0.1)
        assert receiver.received("/flaky")[-1].headers["webhook-id"] == delivery["webhook_message_id"]
        assert len(receiver.processed["/flaky"]) == 1 and processed.headers["webhook-id"] == \
            delivery["webhook_message_id"]
        deadline = time.monotonic() + 10
        while len(deliveries(http, hook["id"])[0]["attempts"]) < 5:
            assert time.monotonic() < deadline, "the manual attempt was not logged"
            time.sleep(0.1)
        last = deliveries(http, hook["id"])[0]["attempts"][-1]
        assert (last["number"], last["manual"], last["status_code"]) == (5, True, 200)


def test_an_endpoint_down_for_the_whole_window_is_marked_failing_until_enabled(allowed_api, user, receiver):
    key, collection_id = user
    receiver.fail_always.add("/down")
    with client(allowed_api, key) as http:
        hook = register(http, f"{receiver.url}/down", events=["job.succeeded"])
        run_job(http, collection_id)
        delivery = wait_delivery(http, hook["id"], "failed", timeout_s=RETRY_WINDOW_S + 20)
        assert len(delivery["attempts"]) >= 4 and {a["status_code"] for a in delivery["attempts"]} == {500}
        assert http.get(f"/v1/webhooks/{hook['id']}").json()["status"] == "failing"
        # Failing: the next job's end is not delivered to it.
        run_job(http, collection_id)
        assert len(deliveries(http, hook["id"])) == 1
        enabled = http.patch(f"/v1/webhooks/{hook['id']}", json={"enabled": True})
        assert enabled.status_code == 200 and enabled.json()["status"] == "active"
        receiver.fail_always.discard("/down")
        run_job(http, collection_id)
        receiver.wait_processed("/down", 1)
        assert wait_delivery(http, hook["id"], "delivered")["attempt_count"] == 1


def test_a_cancelled_job_is_delivered_as_cancelled(stack, allowed_api, user, receiver):
    key, _ = user
    with client(allowed_api, key) as http:
        created = http.post("/v1/collections", json={"name": f"slow-{uuid.uuid4().hex[:6]}"})
        slow = created.json()["id"]
        use_agents(http, slow, {"agent_id": "test_sleepy", "name": "nap", "config": {"sleep_s": 3}})
        hook = register(http, f"{receiver.url}/cancelled", events=["job.cancelled"])
        submitted = http.post("/v1/search", json={"collection_id": slow, "query": "tidal", "use_cache": False})
        assert submitted.status_code == 202, submitted.text
        job_id = submitted.json()["job_id"]
        assert http.delete(f"/v1/jobs/{job_id}").status_code == 202
        (got,) = receiver.wait_processed("/cancelled", 1)
        assert wait_job(http, job_id)["status"] == "cancelled"
    payload = Webhook(hook["secret"]).verify(got.body, got.headers)
    assert payload["type"] == "job.cancelled" and payload["data"]["job_id"] == job_id
    assert payload["data"]["error"] == "cancelled by the user"


@pytest.fixture(scope="module")
def outsider(stack) -> str:
    return stack.create_user(f"refused-{uuid.uuid4().hex[:6]}")


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/hook", "http://169.254.169.254/latest/meta-data/",
                                 "http://localhost:9/hook", "http://[::1]:9/", "file:///etc/passwd"])
def test_internal_urls_are_refused_without_the_operators_allowance(stack, outsider, url):
    with stack.http(outsider) as http:
        refused = http.post("/v1/webhooks", json={"url": url, "events": ["job.succeeded"]})
        assert refused.status_code == 422, refused.text
        assert [d["loc"] for d in refused.json()["detail"]] == [["body", "url"]]
        assert http.get("/v1/webhooks").json() == []  # nothing written


def test_the_operators_allowance_never_opens_the_metadata_service(allowed_api, user):
    key, _ = user
    with client(allowed_api, key) as http:
        refused = http.post("/v1/webhooks", json={"url": "http://169.254.169.254/", "events": ["job.failed"]})
        assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "url"]
        assert "cloud metadata" in refused.json()["detail"][0]["msg"]
        changed = http.post("/v1/webhooks", json={"url": "http://127.0.0.1:9/x", "events": ["job.failed"]}).json()
        moved = http.patch(f"/v1/webhooks/{changed['id']}", json={"url": "http://169.254.169.254/"})
        assert moved.status_code == 422 and moved.json()["detail"][0]["loc"] == ["body", "url"]
        assert http.get(f"/v1/webhooks/{changed['id']}").json()["url"] == "http://127.0.0.1:9/x"
        assert http.delete(f"/v1/webhooks/{changed['id']}").status_code == 204


def test_another_users_webhook_answers_404_like_a_missing_one(stack, allowed_api, user, receiver):
    key, _ = user
    with client(allowed_api, key) as http:
        hook = register(http, f"{receiver.url}/private", events=["job.failed"])
    other = stack.create_user(f"other-{uuid.uuid4().hex[:6]}")
    missing = str(uuid.uuid4())
    with client(allowed_api, other) as http:
        assert http.get("/v1/webhooks").json() == []
        for target in (hook["id"], missing):
            answers = [http.get(f"/v1/webhooks/{target}"),
                       http.patch(f"/v1/webhooks/{target}", json={"enabled": False}),
                       http.post(f"/v1/webhooks/{target}/rotate-secret"),
                       http.get(f"/v1/webhooks/{target}/deliveries"),
                       http.post(f"/v1/webhooks/{target}/deliveries/{uuid.uuid4()}/retry"),
                       http.delete(f"/v1/webhooks/{target}")]
            assert [a.status_code for a in answers] == [404] * 6
            assert answers[0].json()["detail"] == f"webhook {target} not found"
    with client(allowed_api, key) as http:
        kept = http.get(f"/v1/webhooks/{hook['id']}").json()
        assert kept["status"] == "active" and kept["url"] == f"{receiver.url}/private"
        assert http.delete(f"/v1/webhooks/{hook['id']}").status_code == 204


def wait_attempts(http: httpx.Client, hook_id: str, count: int, timeout_s: float) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while True:
        found = deliveries(http, hook_id)
        if found and len(found[0]["attempts"]) >= count:
            return found[0]["attempts"]
        assert time.monotonic() < deadline, f"fewer than {count} attempts recorded after {timeout_s} s: {found}"
        time.sleep(0.2)


def sleepy_collection(http: httpx.Client) -> str:
    """A collection of the client's user whose jobs take a few seconds: long enough to cancel them first."""
    collection = http.post("/v1/collections", json={"name": f"nap-{uuid.uuid4().hex[:6]}"}).json()["id"]
    use_agents(http, collection, {"agent_id": "test_sleepy", "name": "nap", "config": {"sleep_s": 3}})
    return collection


def cancelled_job(http: httpx.Client, collection: str) -> str:
    """A job of the client's user, ended at once by its cancel: the API writes its end and enqueues its deliveries,
    with no worker in between."""
    submitted = http.post("/v1/search", json={"collection_id": collection, "query": "tidal", "use_cache": False})
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["job_id"]
    assert http.delete(f"/v1/jobs/{job_id}").status_code == 202
    return job_id


def test_a_receiver_that_trickles_its_answer_is_cut_off_at_the_attempts_deadline(allowed_api, user, receiver):
    key, collection_id = user
    # The status line at once, then a header byte a second: no read ever waits anywhere near the timeout.
    receiver.trickle["/trickle"] = 1.0
    try:
        with client(allowed_api, key) as http:
            hook = register(http, f"{receiver.url}/trickle", events=["job.succeeded"])
            run_job(http, collection_id)
            receiver.wait_trickling("/trickle", 1)
            first, *_ = wait_attempts(http, hook["id"], 1, timeout_s=TIMEOUT_S + 20)
            assert first["status_code"] is None and first["error"].startswith(f"no answer within {TIMEOUT_S} s")
            assert first["duration_ms"] <= (TIMEOUT_S + 10) * 1000, first
            assert http.delete(f"/v1/webhooks/{hook['id']}").status_code == 204
    finally:
        receiver.trickle.pop("/trickle", None)


def test_one_users_slow_receivers_do_not_hold_up_another_users_delivery(stack, allowed_api, receiver):
    slow_user, other_user = (stack.create_user(f"{n}-{uuid.uuid4().hex[:6]}") for n in ("slow", "other"))
    receiver.trickle["/held"] = 0.2
    try:
        with client(allowed_api, slow_user) as slow, client(allowed_api, other_user) as other:
            held = [register(slow, f"{receiver.url}/held", events=["job.cancelled"]) for _ in range(THREADS + 2)]
            register(other, f"{receiver.url}/prompt", events=["job.cancelled"])
            slow_jobs, other_jobs = sleepy_collection(slow), sleepy_collection(other)
            cancelled_job(slow, slow_jobs)  # six deliveries to receivers that hold every request open
            receiver.wait_trickling("/held", IN_FLIGHT)
            cancelled_job(other, other_jobs)
            (prompt,) = receiver.wait_processed("/prompt", 1, timeout_s=TIMEOUT_S + 20)
            # It went out while the slow user's first attempts were still held, and only the cap of them: the
            # other four were deferred, not queued on threads.
            started = [t for t in receiver.trickled if t.path == "/held" and t.started < prompt.at]
            assert len(started) == IN_FLIGHT, started
            assert all(t.ended is None or t.ended > prompt.at for t in started), started
            # Released, the slow user's six are all delivered: deferred, none lost.
            receiver.trickle.pop("/held")
            receiver.wait_processed("/held", len(held), timeout_s=60)
            for hook in held:
                assert wait_delivery(slow, hook["id"], "delivered")["status"] == "delivered"
    finally:
        receiver.trickle.pop("/held", None)


def test_a_url_with_a_tab_or_a_line_break_is_refused_naming_the_field(allowed_api, user, receiver):
    key, _ = user
    with client(allowed_api, key) as http:
        for url in (f"{receiver.url}/a\tb", f"{receiver.url}/a\r\nX-Injected: 1"):
            refused = http.post("/v1/webhooks", json={"url": url, "events": ["job.failed"]})
            assert refused.status_code == 422, refused.text
            (detail,) = refused.json()["detail"]
            assert detail["loc"] == ["body", "url"] and "control character" in detail["msg"]
        assert all("\t" not in h["url"] and "\n" not in h["url"] for h in http.get("/v1/webhooks").json())


def test_a_user_has_at_most_twenty_webhooks(stack, allowed_api):
    key = stack.create_user(f"many-{uuid.uuid4().hex[:6]}")
    body = {"url": "http://127.0.0.1:9/hook", "events": ["job.succeeded"]}
    with client(allowed_api, key) as http:
        made = [http.post("/v1/webhooks", json=body) for _ in range(20)]
        assert [m.status_code for m in made] == [201] * 20
        refused = http.post("/v1/webhooks", json=body)
        assert refused.status_code == 409, refused.text
        assert "the most one user may have" in refused.json()["detail"]
        assert len(http.get("/v1/webhooks").json()) == 20
