"""Completion webhooks without servers: signatures, the retry schedule, URL checks, and the outbox and courier on
SQLite with a fake sender (the real HTTP path is tests/integration/test_webhooks.py)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from agentsearch.pipeline.job.job_store import JobStore
from agentsearch.pipeline.platform.db import utcnow
from agentsearch.pipeline.platform.egress import EgressPolicy
from agentsearch.pipeline.platform.tables.collections import CollectionRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID
from agentsearch.pipeline.platform.tables.webhooks import WebhookAttemptRow, WebhookDeliveryRow, WebhookRow
from agentsearch.pipeline.webhooks import outbox
from agentsearch.pipeline.webhooks.courier import Courier
from agentsearch.pipeline.webhooks.events import encode
from agentsearch.pipeline.webhooks.outbox import aware, due_deliveries, due_token, on_new_deliveries, record_job_end
from agentsearch.pipeline.webhooks.schedule import RetrySchedule
from agentsearch.pipeline.webhooks.secret import new_secret
from agentsearch.pipeline.webhooks.sender import SendResult
from agentsearch.pipeline.webhooks.signer import WebhookVerificationError, signed_headers, verify
from agentsearch.pipeline.webhooks.target import TargetRefused, checked_url
from tests.support.webhook_receiver import WebhookReceiver

# The Standard Webhooks specification's own example (and svix's test vector).
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TIMESTAMP = 1614265330
VECTOR_BODY = '{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


# -- signatures -----------------------------------------------------------------------------------------------


def test_signature_matches_the_known_vector_and_a_plain_hmac():
    at = datetime.fromtimestamp(VECTOR_TIMESTAMP, UTC)
    headers = signed_headers(VECTOR_SECRET, VECTOR_ID, VECTOR_BODY, at)
    assert headers == {"webhook-id": VECTOR_ID, "webhook-timestamp": str(VECTOR_TIMESTAMP),
                       "webhook-signature": VECTOR_SIGNATURE}
    key = base64.b64decode(VECTOR_SECRET.removeprefix("whsec_"))
    digest = hmac.new(key, f"{VECTOR_ID}.{VECTOR_TIMESTAMP}.{VECTOR_BODY}".encode(), hashlib.sha256).digest()
    assert headers["webhook-signature"] == "v1," + base64.b64encode(digest).decode()


def test_verification_fails_with_a_wrong_secret_or_a_changed_body_or_timestamp():
    secret, body = new_secret(), encode({"type": "job.succeeded", "data": {"job_id": "j1"}})
    now = utcnow()
    headers = signed_headers(secret, "msg_1", body, now)
    assert verify(secret, body, headers)["data"]["job_id"] == "j1"
    with pytest.raises(WebhookVerificationError):
        verify(new_secret(), body, headers)
    with pytest.raises(WebhookVerificationError):
        verify(secret, body.replace("j1", "j2"), headers)
    with pytest.raises(WebhookVerificationError):
        verify(secret, body, {**headers, "webhook-timestamp": str(int(headers["webhook-timestamp"]) + 1)})
    with pytest.raises(WebhookVerificationError):
        verify(secret, body, {**headers, "webhook-id": "msg_2"})
    stale = signed_headers(secret, "msg_1", body, now - timedelta(minutes=10))
    with pytest.raises(WebhookVerificationError):  # a replay of an old delivery
        verify(secret, body, stale)


def test_secrets_are_standard_webhooks_secrets_and_differ():
    first, second = new_secret(), new_secret()
    assert first.startswith("whsec_") and first != second
    assert len(base64.b64decode(first.removeprefix("whsec_"))) == 32


# -- retry schedule -------------------------------------------------------------------------------------------


def test_backoff_doubles_up_to_its_cap():
    schedule = RetrySchedule(base_s=5, max_s=60, window_s=86400)
    assert [schedule.nominal_delay(n) for n in range(1, 8)] == [5, 10, 20, 40, 60, 60, 60]
    assert schedule.nominal_delay(10_000) == 60  # no overflow however many failures


def test_backoff_is_jittered_between_half_and_all_of_the_nominal_wait():
    schedule = RetrySchedule(base_s=4, max_s=3600, window_s=86400)
    assert schedule.next_delay(3, 0, rng=lambda: 0.0) == 8.0
    assert schedule.next_delay(3, 0, rng=lambda: 1.0) == 16.0
    draws = {schedule.next_delay(3, 0) for _ in range(200)}
    assert len(draws) > 100 and all(8.0 <= d <= 16.0 for d in draws)


def test_backoff_never_waits_past_the_window_and_then_gives_up():
    schedule = RetrySchedule(base_s=1, max_s=100, window_s=30)
    assert schedule.next_delay(10, elapsed_s=27, rng=lambda: 1.0) == pytest.approx(3.0)  # the last try: at the end
    assert schedule.next_delay(1, elapsed_s=30) is None
    assert schedule.next_delay(1, elapsed_s=31) is None
    elapsed, attempts = 0.0, 1
    while (delay := schedule.next_delay(attempts, elapsed)) is not None:
        elapsed += delay
        attempts += 1
    assert elapsed == pytest.approx(30.0) and 5 <= attempts <= 12


def test_schedule_settings_are_checked_when_built():
    with pytest.raises(ValidationError):
        RetrySchedule(base_s=10, max_s=5)
    with pytest.raises(ValidationError):
        RetrySchedule(window_s=0)


# -- URL checks -----------------------------------------------------------------------------------------------


def _resolver(table: dict[str, list[str]]):
    def resolve(host: str, _port: int) -> list[str]:
        if host not in table:
            raise OSError(f"{host}: Name or service not known")
        return table[host]

    return resolve


RESOLVE = _resolver({"hooks.example.org": ["93.184.216.34"], "sneaky.example.org": ["93.184.216.34", "10.0.0.5"],
                     "rebound.example.org": ["127.0.0.1"]})


@pytest.mark.parametrize("url, words", [
    ("http://127.0.0.1:8080/hook", "loopback"),
    ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
    ("http://10.1.2.3/hook", "private"),
    ("http://[::1]/hook", "loopback"),
    ("http://2130706433/hook", "loopback"),  # 127.0.0.1 spelled as a number
    ("http://[::ffff:169.254.169.254]/", "cloud metadata"),
    ("https://rebound.example.org/hook", "resolves to 127.0.0.1"),
    ("https://sneaky.example.org/hook", "private"),
    ("ftp://hooks.example.org/hook", "http:// or https://"),
    ("hooks.example.org/hook", "http:// or https://"),
    ("https:///hook", "no host"),
    ("https://nowhere.invalid/hook", "does not resolve"),
    ("https://hooks.example.org:99999/", "not a valid URL"),
    ("https://hooks.example.org/hook#part", "fragment"),
])
def test_internal_or_malformed_urls_are_refused(url, words):
    with pytest.raises(TargetRefused, match=words):
        checked_url(url, EgressPolicy(), RESOLVE)


def test_public_urls_pass_and_the_operator_can_allow_internal_ones():
    assert checked_url(" https://hooks.example.org/agentsearch?x=1 ", EgressPolicy(), RESOLVE) == \
        "https://hooks.example.org/agentsearch?x=1"
    allowed = EgressPolicy.parse(["127.0.0.1"])
    assert checked_url("http://127.0.0.1:8080/hook", allowed, RESOLVE) == "http://127.0.0.1:8080/hook"
    # A broad allowance never opens the metadata service; only an entry naming it exactly does.
    with pytest.raises(TargetRefused, match="cloud metadata"):
        checked_url("http://169.254.169.254/", EgressPolicy.parse(["169.254.0.0/16"]), RESOLVE)
    with pytest.raises(TargetRefused, match=r"too long|limit"):
        checked_url("https://hooks.example.org/" + "a" * 3000, EgressPolicy(), RESOLVE)


# -- outbox and courier ---------------------------------------------------------------------------------------


@pytest.fixture
def db(migrated_db):
    return migrated_db


@pytest.fixture
def heard(monkeypatch):
    got: list[tuple[str, str]] = []
    monkeypatch.setattr(outbox, "_listeners", [])
    on_new_deliveries(got.extend)
    return got


def _collection(db) -> uuid.UUID:
    with db.session() as s:
        row = CollectionRow(name=f"c-{uuid.uuid4().hex[:6]}", user_id=DEFAULT_USER_ID, embedding_model="m")
        s.add(row)
        s.flush()
        return row.id


def _webhook(db, events=("job.succeeded", "job.failed", "job.cancelled"), status="active", user_id=DEFAULT_USER_ID,
             url="https://hooks.example.org/h") -> WebhookRow:
    with db.session() as s:
        row = WebhookRow(user_id=user_id, url=url, events=list(events), secret=new_secret(), status=status)
        s.add(row)
        s.flush()
        return row


def _job(db, collection_id, user_id=DEFAULT_USER_ID) -> str:
    job_id = uuid.uuid4()
    with db.session() as s:
        JobStore(db).create(s, job_id, user_id, collection_id, "q", request={}, deadline_s=600)
    return str(job_id)


def _deliveries(db) -> list[WebhookDeliveryRow]:
    with db.session() as s:
        return list(s.query(WebhookDeliveryRow).order_by(WebhookDeliveryRow.created_at).all())


def test_every_end_of_a_job_writes_its_delivery_and_is_heard_after_the_commit(db, heard):
    collection = _collection(db)
    hook = _webhook(db)
    _webhook(db, events=("job.failed",))  # not subscribed to success or cancel
    _webhook(db, status="disabled")
    jobs = JobStore(db)
    done, broken, stopped = _job(db, collection), _job(db, collection), _job(db, collection)
    report = {"id": "a1", "agent_id": "pdf_report", "type": "pdf", "filename": "r.pdf",
              "content_type": "application/pdf", "size": 5, "metadata": {}}
    assert jobs.succeed(done, {"answer": "a", "agent_artifacts": [report]}, [], {})
    assert not jobs.succeed(done, {"answer": "again"}, [], {})  # a second end writes nothing
    jobs.fail(broken, "boom")
    assert jobs.cancel(stopped)
    rows = _deliveries(db)
    assert [(r.event, str(r.job_id)) for r in rows if r.webhook_id == hook.id] == [
        ("job.succeeded", done), ("job.failed", broken), ("job.cancelled", stopped)]
    assert sorted(r.event for r in rows) == ["job.cancelled", "job.failed", "job.failed", "job.succeeded"]
    assert sorted(i for i, _ in heard) == sorted(str(r.id) for r in rows)
    succeeded = next(r for r in rows if r.event == "job.succeeded")
    assert succeeded.payload["data"] == {
        "job_id": done, "status": "succeeded", "collection_id": str(collection),
        "links": {"job": f"/v1/jobs/{done}", "events": f"/v1/jobs/{done}/events",
                  "artifacts": [f"/v1/jobs/{done}/artifacts/r.pdf"]}}
    failed = next(r for r in rows if r.event == "job.failed" and r.webhook_id == hook.id)
    assert failed.payload["data"]["error"] == "boom"
    assert len({r.message_id for r in rows}) == len(rows)


def test_a_job_reaped_past_its_deadline_and_one_answered_from_the_cache_are_delivered_too(db, heard):
    collection = _collection(db)
    _webhook(db)
    jobs = JobStore(db)
    late = _job(db, collection)
    jobs.reap(now=utcnow() + timedelta(hours=1))
    source = _job(db, collection)
    jobs.succeed(source, {"answer": "a", "complete": True}, [], {})
    with db.session() as s:
        earlier = jobs._job(s, source)
        copy = uuid.uuid4()
        jobs.create(s, copy, DEFAULT_USER_ID, collection, "q", request={}, deadline_s=600, answered_from=earlier)
    events = {(str(r.job_id), r.event) for r in _deliveries(db)}
    assert {(late, "job.failed"), (source, "job.succeeded"), (str(copy), "job.succeeded")} == events
    assert len(heard) == 3


def test_nothing_is_written_or_heard_when_the_transaction_rolls_back(db, heard):
    collection = _collection(db)
    _webhook(db)
    job_id = _job(db, collection)
    with pytest.raises(RuntimeError), db.session() as s:
        job = JobStore(db)._job(s, job_id)
        job.status = "failed"
        assert record_job_end(s, job)
        raise RuntimeError("the job's end did not commit")
    assert _deliveries(db) == [] and heard == []


class FakeSender:
    def __init__(self, *codes: int) -> None:
        self.codes, self.sent = list(codes), []

    def send(self, url, secret, message_id, body) -> SendResult:
        self.sent.append(message_id)
        code = self.codes.pop(0) if self.codes else 200
        if code == 200:
            return SendResult("delivered", 1.0, 200)
        return SendResult("http_error", 1.0, code, f"the receiver answered HTTP {code}")


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now


def _one_delivery(db) -> str:
    collection = _collection(db)
    _webhook(db)
    JobStore(db).fail(_job(db, collection), "boom")
    (row,) = _deliveries(db)
    return str(row.id)


def test_a_failing_receiver_is_retried_on_the_schedule_until_it_answers(db, heard):
    delivery = _one_delivery(db)
    clock, sender = Clock(), FakeSender(500, 503)
    courier = Courier(db, sender, RetrySchedule(base_s=2, max_s=60, window_s=3600), clock=clock, rng=lambda: 1.0)
    first = courier.attempt(delivery)
    assert (first.outcome, first.attempt, first.retry_in_s) == ("retry", 1, 2.0)
    assert courier.attempt(delivery).detail == "not due"  # a second copy of the task sends nothing
    clock.now += timedelta(seconds=2)
    second = courier.attempt(delivery, due=first.due)
    assert (second.outcome, second.retry_in_s) == ("retry", 4.0)
    clock.now += timedelta(seconds=4)
    assert courier.attempt(delivery).outcome == "delivered"
    assert courier.attempt(delivery).detail == "already delivered"
    assert len(set(sender.sent)) == 1 and len(sender.sent) == 3  # one webhook-id for every attempt
    with db.session() as s:
        codes = [a.status_code for a in s.query(WebhookAttemptRow).order_by(WebhookAttemptRow.number)]
    assert codes == [500, 503, 200]


def test_a_delivery_that_exhausts_its_window_marks_the_webhook_failing_until_it_is_enabled(db, heard):
    delivery = _one_delivery(db)
    clock = Clock()
    courier = Courier(db, FakeSender(*[500] * 50), RetrySchedule(base_s=1, max_s=4, window_s=10), clock=clock)
    outcomes = []
    while True:
        report = courier.attempt(delivery)
        outcomes.append(report.outcome)
        if report.outcome != "retry":
            break
        clock.now += timedelta(seconds=report.retry_in_s)
    assert outcomes[-1] == "gave_up" and 4 <= len(outcomes) <= 12
    with db.session() as s:
        (hook,) = s.query(WebhookRow).all()
        row = s.get(WebhookDeliveryRow, uuid.UUID(delivery))
        assert (hook.status, row.status, row.last_error) == ("failing", "failed", "the receiver answered HTTP 500")
    # While failing it receives nothing new.
    JobStore(db).fail(_job(db, _collection(db)), "again")
    assert len(_deliveries(db)) == 1
    # A manual attempt still goes out, whatever the status.
    manual = Courier(db, FakeSender(200), RetrySchedule(), clock=clock).attempt(delivery, manual=True)
    assert manual.outcome == "delivered"


def test_the_sweep_leases_due_deliveries_so_they_are_sent_once(db, heard):
    delivery = _one_delivery(db)
    now = utcnow() + timedelta(seconds=1)
    (found,) = due_deliveries(db, now, lease_s=40)
    assert found[0] == delivery
    assert due_deliveries(db, now + timedelta(seconds=5), lease_s=40) == []  # leased: not sent twice
    sender = FakeSender()
    courier = Courier(db, sender, RetrySchedule(), clock=lambda: now)
    assert courier.attempt(delivery).detail == "not due"           # a stray copy without the lease's token
    assert courier.attempt(delivery, due=found[1]).outcome == "delivered"
    assert len(sender.sent) == 1
    # A lease that ran out (the worker holding it died) comes due again.
    with db.session() as s:
        row = s.get(WebhookDeliveryRow, uuid.UUID(delivery))
        row.status, row.next_attempt_at = "pending", now
    assert [d for d, _ in due_deliveries(db, now + timedelta(seconds=41), lease_s=40)] == [delivery]


def test_a_disabled_webhooks_pending_deliveries_end_unsent(db, heard):
    delivery = _one_delivery(db)
    with db.session() as s:
        s.query(WebhookRow).update({"status": "disabled"})
    sender = FakeSender()
    report = Courier(db, sender, RetrySchedule()).attempt(delivery)
    assert (report.outcome, report.detail, sender.sent) == ("gave_up", "not sent: the webhook is disabled", [])


def test_workers_racing_for_one_due_delivery_send_it_once(db, heard):
    from concurrent.futures import ThreadPoolExecutor

    delivery = _one_delivery(db)
    sender = FakeSender()
    courier = Courier(db, sender, RetrySchedule())
    with ThreadPoolExecutor(8) as pool:
        reports = list(pool.map(lambda _: courier.attempt(delivery), range(8)))
    assert sorted(r.outcome for r in reports).count("delivered") == 1
    assert len(sender.sent) == 1


def test_the_sender_goes_through_the_egress_guard():
    from agentsearch.pipeline.webhooks.sender import WebhookSender

    refused = WebhookSender(EgressPolicy(), timeout_s=2).send("http://127.0.0.1:9/hook", new_secret(), "msg_1", "{}")
    assert (refused.outcome, refused.status_code) == ("refused", None)
    assert refused.error.startswith("egress refused: 127.0.0.1 is a loopback address")
    metadata = WebhookSender(EgressPolicy.parse(["169.254.0.0/16"])).send("http://169.254.169.254/", new_secret(),
                                                                          "msg_2", "{}")
    assert metadata.outcome == "refused" and "cloud metadata" in metadata.error


def test_attempts_are_counted_by_outcome(redis_client):
    from prometheus_client import CollectorRegistry, generate_latest

    from agentsearch.pipeline.observability.exposition import AgentSearchCollector
    from agentsearch.pipeline.observability.metrics import MetricsRecorder

    recorder = MetricsRecorder(redis_client)
    for outcome in ("delivered", "http_error", "http_error"):
        recorder.record_webhook_attempt(outcome)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(AgentSearchCollector(redis_client))
    text = generate_latest(registry).decode()
    assert 'agentsearch_webhook_attempts_total{outcome="http_error"} 2.0' in text
    assert 'agentsearch_webhook_attempts_total{outcome="delivered"} 1.0' in text
    assert 'agentsearch_webhook_attempts_total{outcome="timeout"} 0.0' in text


# -- one attempt at a time, each bounded as a whole; fairness between users -------------------------------------

ALLOW_LOOPBACK = EgressPolicy.parse(["127.0.0.1"])


def _in_thread(work) -> threading.Thread:
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def _wait(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_an_attempt_ends_at_its_deadline_however_slowly_the_receiver_trickles():
    from agentsearch.pipeline.webhooks.sender import WebhookSender

    with WebhookReceiver() as receiver:
        receiver.trickle["/slow"] = 0.2  # each read gets a byte long before a 1 s read timeout
        results: list[SendResult] = []
        started = time.monotonic()
        attempt = _in_thread(lambda: results.append(
            WebhookSender(ALLOW_LOOPBACK, timeout_s=1).send(f"{receiver.url}/slow", new_secret(), "msg_1", "{}")))
        attempt.join(1 + 10)
        assert not attempt.is_alive(), "the attempt was still open 10 s past its 1 s deadline"
        assert time.monotonic() - started < 1 + 10
        (result,) = results
        assert result.outcome == "timeout" and result.error.startswith("no answer within 1 s")
        assert 900 <= result.duration_ms < 11_000
        _wait(lambda: not receiver.trickling("/slow"), 10, "the receiver still holds the request")


def test_the_lease_outlasts_each_attempt_so_the_sweep_never_sends_a_second_copy_beside_it(db, heard, monkeypatch):
    from agentsearch.pipeline.webhooks import courier as courier_module
    from agentsearch.pipeline.webhooks.sender import WebhookSender

    # A short lease, so that an attempt that outlived it would show within seconds.
    monkeypatch.setattr(courier_module, "LEASE_MARGIN_S", 1.0)
    lease_s = 1 + courier_module.LEASE_MARGIN_S
    with WebhookReceiver() as receiver:
        receiver.trickle["/slow"] = 0.05
        delivery = _one_delivery(db)
        with db.session() as s:
            s.query(WebhookRow).update({"url": f"{receiver.url}/slow"})
        # Retried a second or two after each timeout: a second attempt never starts as the first is hung up.
        courier = Courier(db, WebhookSender(ALLOW_LOOPBACK, timeout_s=1),
                          RetrySchedule(base_s=2, max_s=2, window_s=3600), timeout_s=1)
        _in_thread(lambda: courier.attempt(delivery))
        most_open = 0

        def two_attempts_recorded() -> bool:
            nonlocal most_open
            for found, token in due_deliveries(db, utcnow(), lease_s=lease_s):  # the sweep, every 50 ms
                _in_thread(lambda found=found, token=token: courier.attempt(found, due=token))
            most_open = max(most_open, len(receiver.trickling("/slow")))
            assert most_open <= 1, "two attempts of one delivery were out at once"
            with db.session() as s:
                return s.query(WebhookAttemptRow).count() >= 2

        _wait(two_attempts_recorded, 30, "fewer than two attempts recorded")
        with db.session() as s:
            attempts = s.query(WebhookAttemptRow).order_by(WebhookAttemptRow.number).all()
        assert all(a.error.startswith("no answer within 1 s") for a in attempts)
        first, second = attempts[:2]
        assert aware(first.started_at) + timedelta(milliseconds=first.duration_ms) <= aware(second.started_at)


class HeldSender(FakeSender):
    """Holds the attempts to ``held_url`` until ``release`` is set; ``out`` counts those waiting."""

    def __init__(self, held_url: str) -> None:
        super().__init__()
        self.held_url, self.release, self.out = held_url, threading.Event(), 0
        self._lock = threading.Lock()

    def send(self, url, secret, message_id, body) -> SendResult:
        if url == self.held_url:
            with self._lock:
                self.out += 1
            self.release.wait(30)
        return super().send(url, secret, message_id, body)


def test_a_manual_attempt_waits_while_another_attempt_of_the_delivery_is_out(db, heard):
    delivery = _one_delivery(db)
    sender = HeldSender("https://hooks.example.org/h")
    courier = Courier(db, sender, RetrySchedule())
    automatic: list = []
    first = _in_thread(lambda: automatic.append(courier.attempt(delivery)))
    _wait(lambda: sender.out == 1, 10, "the first attempt never went out")
    sender.held_url = None  # a second send, if one were made, would not wait
    manual = courier.attempt(delivery, manual=True)
    assert (manual.outcome, manual.detail) == ("deferred", "another attempt of it is out")
    assert 0.5 <= manual.retry_in_s <= 1.5 and len(sender.sent) == 0
    sender.release.set()
    first.join(10)
    assert automatic[0].outcome == "delivered" and len(sender.sent) == 1
    assert courier.attempt(delivery, manual=True).outcome == "delivered"  # its turn, once the first is recorded
    with db.session() as s:
        assert [a.manual for a in s.query(WebhookAttemptRow).order_by(WebhookAttemptRow.number)] == [False, True]
        assert s.get(WebhookDeliveryRow, uuid.UUID(delivery)).sending_until is None


def test_an_automatic_attempt_waits_while_a_manual_one_is_out(db, heard):
    delivery = _one_delivery(db)
    sender = HeldSender("https://hooks.example.org/h")
    courier = Courier(db, sender, RetrySchedule(), rng=lambda: 0.5)
    manual = _in_thread(lambda: courier.attempt(delivery, manual=True))
    _wait(lambda: sender.out == 1, 10, "the manual attempt never went out")
    automatic = courier.attempt(delivery)  # due since the job ended: a manual attempt moves no lease
    assert (automatic.outcome, automatic.detail, automatic.retry_in_s) == ("deferred", "another attempt of it is out",
                                                                          1.0)
    sender.release.set()
    manual.join(10)
    assert courier.attempt(delivery, due=automatic.due).detail == "already delivered"
    assert len(sender.sent) == 1


def test_one_users_attempts_out_at_once_are_capped_and_the_rest_deferred_not_another_users(db, heard):
    from agentsearch.pipeline.security.users import UserStore

    slow, fast = "https://slow.example.org/h", "https://fast.example.org/h"
    other_user, _ = UserStore(db).create(f"other-{uuid.uuid4().hex[:6]}")
    for _ in range(3):
        _webhook(db, user_id=DEFAULT_USER_ID, url=slow)
    _webhook(db, user_id=other_user, url=fast)
    collection = _collection(db)
    JobStore(db).fail(_job(db, collection), "boom")
    JobStore(db).fail(_job(db, collection, user_id=other_user), "boom")
    with db.session() as s:
        mine = [str(d.id) for d, h in s.query(WebhookDeliveryRow, WebhookRow)
                .join(WebhookRow, WebhookRow.id == WebhookDeliveryRow.webhook_id).filter(WebhookRow.url == slow)]
        (theirs,) = [str(d.id) for d, h in s.query(WebhookDeliveryRow, WebhookRow)
                     .join(WebhookRow, WebhookRow.id == WebhookDeliveryRow.webhook_id).filter(WebhookRow.url == fast)]
    sender = HeldSender(slow)
    courier = Courier(db, sender, RetrySchedule(), max_in_flight=2, rng=lambda: 0.5)
    held = [_in_thread(lambda d=d: courier.attempt(d)) for d in mine[:2]]
    _wait(lambda: sender.out == 2, 10, "the first two attempts never went out")

    deferred = courier.attempt(mine[2])
    assert (deferred.outcome, deferred.retry_in_s, deferred.attempt) == ("deferred", 1.0, None)
    assert deferred.detail == "its user has 2 attempts out, the most at once"
    assert sender.out == 2  # nothing sent, no thread held
    with db.session() as s:
        row = s.get(WebhookDeliveryRow, uuid.UUID(mine[2]))
        assert row.attempts == 0 and row.sending_until is None and due_token(row.next_attempt_at) == deferred.due
        assert s.query(WebhookAttemptRow).count() == 0
    assert courier.attempt(theirs).outcome == "delivered"  # another user's delivery goes out meanwhile
    assert courier.attempt(mine[2], manual=True).outcome == "deferred"  # a manual one waits its turn as well

    sender.release.set()
    for thread in held:
        thread.join(10)
    assert courier.attempt(mine[2], due=deferred.due).outcome == "delivered"
    with db.session() as s:
        assert s.query(WebhookDeliveryRow).filter(WebhookDeliveryRow.status == "delivered").count() == 4
        assert s.query(WebhookDeliveryRow).filter(WebhookDeliveryRow.sending_until.is_not(None)).count() == 0


def test_a_users_deferred_attempts_come_back_spaced_by_how_many_wait(db, heard):
    for _ in range(20):
        _webhook(db)
    collection = _collection(db)
    for _ in range(3):
        JobStore(db).fail(_job(db, collection), "boom")
    first, second, *_ = [str(r.id) for r in _deliveries(db)]
    clock = Clock()
    courier = Courier(db, FakeSender(), RetrySchedule(), max_in_flight=1, clock=clock, rng=lambda: 0.5)
    with db.session() as s:  # one attempt out: the user's cap
        s.get(WebhookDeliveryRow, uuid.UUID(first)).sending_until = clock.now + courier.lease
    # Sixty wait: each comes back in about three seconds, so together about twenty a second, not sixty.
    assert courier.attempt(second).retry_in_s == pytest.approx(3.0)


def test_a_claim_that_lapsed_frees_its_place_and_its_delivery(db, heard):
    delivery = _one_delivery(db)
    clock = Clock()
    sender = FakeSender()
    courier = Courier(db, sender, RetrySchedule(), timeout_s=10, max_in_flight=1, clock=clock)
    with db.session() as s:  # as a worker lost mid-attempt leaves it
        row = s.get(WebhookDeliveryRow, uuid.UUID(delivery))
        row.sending_until = row.next_attempt_at = clock.now + courier.lease
    assert courier.attempt(delivery, manual=True).outcome == "deferred"
    clock.now += courier.lease + timedelta(seconds=1)
    (found,) = due_deliveries(db, clock.now, lease_s=40)
    assert courier.attempt(delivery, due=found[1]).outcome == "delivered"


def test_whatever_the_send_raises_is_a_failed_attempt_with_its_reason_scheduled_again(db, heard):
    from agentsearch.pipeline.webhooks.sender import WebhookSender

    delivery = _one_delivery(db)
    with db.session() as s:  # stored before URLs were checked for control characters
        s.query(WebhookRow).update({"url": "https://hooks.example.org/a\tb"})
    clock = Clock()
    courier = Courier(db, WebhookSender(EgressPolicy(), timeout_s=2), RetrySchedule(base_s=2, window_s=60),
                      clock=clock, rng=lambda: 1.0)
    report = courier.attempt(delivery)
    assert (report.outcome, report.attempt, report.retry_in_s) == ("retry", 1, 2.0)
    assert report.detail.startswith("not sent: InvalidURL: ")
    with db.session() as s:
        (attempt,) = s.query(WebhookAttemptRow).all()
        row = s.get(WebhookDeliveryRow, uuid.UUID(delivery))
        assert attempt.error.startswith("not sent: InvalidURL: ") and attempt.status_code is None
        assert (row.status, row.last_error, row.sending_until) == ("pending", attempt.error, None)

    class Broken:
        def send(self, *args):
            raise RuntimeError("a bug")

    outcomes = []
    while not outcomes or outcomes[-1] == "retry":
        clock.now += timedelta(seconds=30)
        outcomes.append(Courier(db, Broken(), RetrySchedule(base_s=2, window_s=60), clock=clock).attempt(delivery)
                        .outcome)
    assert outcomes[-1] == "gave_up"  # given up at the window's end, as any failing delivery is
    with db.session() as s:
        assert s.get(WebhookDeliveryRow, uuid.UUID(delivery)).last_error == "not sent: RuntimeError: a bug"
        assert s.query(WebhookRow).one().status == "failing"


@pytest.mark.parametrize("url", ["https://hooks.example.org/a\tb", "https://hooks.example.org/a\r\nX-Injected: 1",
                                 "https://hooks.example.org/a\nb", "https://hooks.example.org/a\x00b",
                                 "https://hooks.\x7fexample.org/"])
def test_urls_with_control_characters_are_refused(url):
    with pytest.raises(TargetRefused, match="control character"):
        checked_url(url, EgressPolicy(), RESOLVE)


@pytest.mark.parametrize("manual, kwargs", [(False, None), (True, {"manual": True})])
def test_a_deferred_attempt_is_enqueued_again_and_its_task_ends(monkeypatch, manual, kwargs):
    from agentsearch.pipeline.webhooks.courier import AttemptReport
    from agentsearch.worker import webhooks as tasks

    class Stub:
        def attempt(self, delivery_id, due=None, manual=False):
            return AttemptReport(delivery_id, "deferred", retry_in_s=0.7, due=None if manual else "token")

    sent = []
    monkeypatch.setattr(tasks, "_courier", Stub)
    monkeypatch.setattr(tasks.deliver_webhook, "apply_async", lambda *a, **kw: sent.append((a, kw)))
    assert tasks.deliver_webhook.run("d1", manual=manual)["outcome"] == "deferred"
    assert sent == [((("d1", None if manual else "token"), kwargs), {"countdown": 0.7})]
