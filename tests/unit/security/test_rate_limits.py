"""Rate limits and quotas per user: effective limits, the classes of routes, the counters, the headers, and the API's
answers past a limit (in-process app, SQLite and the counters in memory)."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from pydantic import ValidationError

from agentsearch.api.rate_limits import rate_limit_headers
from agentsearch.pipeline.platform.db import Database
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.collections import CollectionRow, DocumentRow
from agentsearch.pipeline.platform.tables.jobs import JobRow
from agentsearch.pipeline.platform.tables.users import UserRow
from agentsearch.pipeline.refusal import Refusal
from agentsearch.pipeline.security.quotas import (
    LimitOverrides,
    Limits,
    QuotaError,
    QuotaStore,
    check_document_quota,
    route_class,
)
from agentsearch.pipeline.security.rate_windows import RateWindows, Window

# -- effective limits -------------------------------------------------------------------------------------------


def test_defaults_come_from_the_settings(tmp_path):
    settings = Settings(data_dir=tmp_path, rate_limit_searches_per_minute=7, max_documents=9)
    limits = Limits.defaults(settings)
    assert limits.searches_per_minute == 7 and limits.max_documents == 9
    assert limits.reads_per_minute == Settings(data_dir=tmp_path).rate_limit_reads_per_minute
    assert (limits.per_minute("search"), limits.per_minute("ingest"), limits.per_minute("read")) == (
        7, limits.ingest_per_minute, limits.reads_per_minute)


def test_overrides_replace_only_the_values_they_set():
    defaults = Limits(searches_per_minute=60, reads_per_minute=1200, ingest_per_minute=120, max_running_jobs=10,
                      max_documents=100_000)
    limits = defaults.overlaid(LimitOverrides(searches_per_minute=5, max_running_jobs=0))
    assert limits == defaults.model_copy(update={"searches_per_minute": 5, "max_running_jobs": 0})
    assert defaults.overlaid(LimitOverrides()) == defaults
    merged = LimitOverrides(searches_per_minute=5, max_documents=3).merged(LimitOverrides(max_documents=4))
    assert merged == LimitOverrides(searches_per_minute=5, max_documents=4)
    assert merged.set_names() == ["searches_per_minute", "max_documents"]


@pytest.mark.parametrize("bad", [{"searches_per_minute": -1}, {"max_documents": 2**31}, {"searches": 3}])
def test_an_override_out_of_range_or_unknown_is_refused(bad):
    with pytest.raises(ValidationError):
        LimitOverrides(**bad)


def test_a_setting_out_of_range_stops_the_process_at_start(tmp_path):
    with pytest.raises(ValidationError, match="rate_limit_reads_per_minute"):
        Settings(data_dir=tmp_path, rate_limit_reads_per_minute=-5)


# -- classes of routes ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "kind"), [
    ("POST", "/v1/search", "search"),
    ("POST", "/v1/profile-sets/{set_id}/runs", "search"),
    ("POST", "/v1/collections/{collection_id}/documents", "ingest"),
    ("POST", "/v1/collections/{collection_id}/files", "ingest"),
    ("GET", "/v1/jobs/{job_id}", "read"),
    ("GET", "/v1/profile-sets/{set_id}/runs", "read"),
    ("DELETE", "/v1/collections/{collection_id}/documents/{document_id}", "read"),
    ("POST", "/v1/collections", "read"),
    ("POST", "/v1/agent-configs", "read"),
    ("GET", "/v1/me", "read"),
    ("GET", "/healthz", None),
    ("GET", "/readyz", None),
    ("GET", "/metrics", None),
])
def test_each_route_counts_in_its_class(method, path, kind):
    assert route_class(method, path) == kind


def test_the_classes_name_routes_the_app_has(app):
    # A renamed route would silently fall back to "read": the templates above must be the app's own.
    routes = {(method.upper(), path) for path, item in app.openapi()["paths"].items() for method in item}
    starts_jobs = {route for route in routes if route_class(*route) == "search"}
    assert starts_jobs == {("POST", "/v1/search"), ("POST", "/v1/profile-sets/{set_id}/runs")}
    assert {route for route in routes if route_class(*route) == "ingest"} == {
        ("POST", "/v1/collections/{collection_id}/documents"), ("POST", "/v1/collections/{collection_id}/files"),
        # Reading a source now brings its documents in like an upload does.
        ("POST", "/v1/collections/{collection_id}/sources/{source_id}/runs")}


# -- headers ----------------------------------------------------------------------------------------------------


def test_header_values():
    assert rate_limit_headers(Window(limit=60, remaining=12, reset_s=41.4)) == {
        "RateLimit-Limit": "60", "RateLimit-Remaining": "12", "RateLimit-Reset": "41"}
    # Exhausted: the reset is the wait before one more request passes, never 0.
    assert rate_limit_headers(Window(limit=3, remaining=0, reset_s=0.2, allowed=False))["RateLimit-Reset"] == "1"
    assert Window(limit=3, remaining=0, reset_s=17.01, allowed=False).retry_after_s == 18


# -- counters ---------------------------------------------------------------------------------------------------


def test_a_moving_window_admits_the_limit_and_counts_no_refused_request():
    windows = RateWindows(None)
    user = uuid.uuid4()
    hits = [windows.hit(user, "search", 3) for _ in range(5)]
    assert [h.allowed for h in hits] == [True, True, True, False, False]
    assert [h.remaining for h in hits] == [2, 1, 0, 0, 0]
    assert 55 <= hits[-1].retry_after_s <= 60
    assert windows.peek(user, "search", 3).remaining == 0
    # Another class, another user: counted apart.
    assert windows.hit(user, "read", 3).remaining == 2
    assert windows.hit(uuid.uuid4(), "search", 3).remaining == 2
    assert windows.peek(uuid.uuid4(), "search", 3) == Window(limit=3, remaining=3, reset_s=0.0, allowed=True)


def test_a_limit_of_zero_admits_nothing():
    windows = RateWindows(None)
    assert windows.hit(uuid.uuid4(), "ingest", 0).allowed is False
    assert windows.admit_job(uuid.uuid4(), 0, running=lambda: 0).admitted is False


def test_the_window_moves_and_admits_again_when_the_oldest_request_leaves_it():
    windows = RateWindows(None, window_s=1)
    user = uuid.uuid4()
    assert windows.hit(user, "read", 2).allowed and windows.hit(user, "read", 2).allowed
    refused = windows.hit(user, "read", 2)
    assert not refused.allowed and refused.reset_s <= 1
    time.sleep(refused.reset_s + 0.05)
    assert windows.hit(user, "read", 2).allowed


def test_redis_away_lets_requests_through_and_is_not_asked_again_at_once(caplog):
    windows = RateWindows("redis://127.0.0.1:1/0")  # nothing listens there
    user = uuid.uuid4()
    assert windows.hit(user, "search", 1) is None
    # Redis is left alone a while: the next calls pass at once, without asking it (a call that did would raise).
    windows.limiter = windows.storage = None
    assert windows.hit(user, "search", 1) is None and windows.peek(user, "read", 5) is None
    assert "rate limit counters unavailable" in caplog.text
    admission = windows.admit_job(user, 1, running=lambda: 0)
    assert admission.admitted  # the database's count alone decides
    assert not windows.admit_job(user, 1, running=lambda: 1).admitted


# -- running jobs -----------------------------------------------------------------------------------------------


def test_an_admission_is_held_until_released():
    windows = RateWindows(None)
    user = uuid.uuid4()
    first = windows.admit_job(user, 2, running=lambda: 1)
    assert first.admitted
    # First's job is not written yet: it holds its place, so a second cannot take the last one.
    assert not windows.admit_job(user, 2, running=lambda: 1).admitted
    first.release()
    first.release()  # only the first release counts
    assert windows.admit_job(user, 2, running=lambda: 1).admitted


def test_an_admission_with_its_limit_read_beside_the_count_holds_as_one_given_the_limit():
    windows = RateWindows(None)
    user = uuid.uuid4()
    first = windows.admit_job_counted(user, lambda: (2, 1))
    assert (first.admitted, first.running, first.limit) == (True, 1, 2)
    refused = windows.admit_job_counted(user, lambda: (2, 1))  # first holds its place
    assert (refused.admitted, refused.running, refused.limit) == (False, 1, 2)
    first.release()
    # A limit of 0 admits none and says so as admit_job does, whatever is running; no place is kept.
    assert windows.admit_job_counted(user, lambda: (0, 3)) == windows.admit_job(user, 0, running=lambda: 3)
    assert windows.admit_job_counted(user, lambda: (1, 0)).admitted


def test_concurrent_submissions_never_pass_the_running_jobs_limit():
    windows = RateWindows(None)
    user = uuid.uuid4()
    rows: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(12)

    def submit() -> None:
        start.wait()
        admission = windows.admit_job(user, 4, running=lambda: len(rows))
        if admission.admitted:
            time.sleep(0.01)  # the job's row is being written
            with lock:
                rows.append(1)
            admission.release()

    threads = [threading.Thread(target=submit) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 1 <= len(rows) <= 4


# -- the database's side ----------------------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path):
    from tests.support.databases import migrated_sqlite

    url = f"sqlite:///{tmp_path / 'q.db'}"
    migrated_sqlite(url)
    return Database(url)


def _user(db: Database, name: str) -> uuid.UUID:
    user_id = uuid.uuid4()
    with db.session() as s:
        s.add(UserRow(id=user_id, name=name))
    return user_id


def test_overrides_are_stored_merged_and_reset(db):
    alice = _user(db, "alice")
    store = QuotaStore(db)
    defaults = Limits(searches_per_minute=60, reads_per_minute=1200, ingest_per_minute=120, max_running_jobs=10,
                      max_documents=100)
    assert store.effective(alice, defaults) == defaults
    store.set_overrides("alice", LimitOverrides(searches_per_minute=5))
    store.set_overrides("alice", LimitOverrides(max_documents=7))
    assert store.effective(alice, defaults) == defaults.model_copy(update={"searches_per_minute": 5,
                                                                           "max_documents": 7})
    assert store.set_overrides("alice", LimitOverrides(), reset=True) == LimitOverrides()
    assert store.effective(alice, defaults) == defaults
    with pytest.raises(QuotaError, match="no user named 'bob'"):
        store.set_overrides("bob", LimitOverrides(max_documents=1))


def test_a_searchs_limits_and_running_jobs_are_read_together(db):
    alice = _user(db, "alice")
    store = QuotaStore(db)
    defaults = Limits(searches_per_minute=60, reads_per_minute=1200, ingest_per_minute=120, max_running_jobs=10,
                      max_documents=100)
    assert store.effective_and_running(alice, defaults) == (defaults, 0)  # no overrides, no jobs
    assert store.effective_and_running(uuid.uuid4(), defaults) == (defaults, 0)  # no such user
    store.set_overrides("alice", LimitOverrides(max_running_jobs=3))
    with db.session() as s:
        collection = CollectionRow(user_id=alice, name="c", embedding_model="m")
        s.add(collection)
        s.flush()
        s.add_all(JobRow(user_id=alice, collection_id=collection.id, query="q", status=status)
                  for status in ("queued", "running", "succeeded"))
    assert store.effective_and_running(alice, defaults) == (store.effective(alice, defaults),
                                                            store.running_jobs(alice))
    assert store.effective_and_running(alice, defaults)[0].max_running_jobs == 3
    assert store.running_jobs(alice) == 2


def test_the_document_quota_counts_every_collection_of_the_user_and_no_one_elses(db):
    alice, bob = _user(db, "alice"), _user(db, "bob")
    with db.session() as s:
        for owner, count in ((alice, 2), (alice, 1), (bob, 5)):
            collection = CollectionRow(user_id=owner, name=uuid.uuid4().hex, embedding_model="m")
            s.add(collection)
            s.flush()
            s.add_all(DocumentRow(collection_id=collection.id, external_id=str(i), text="t") for i in range(count))
    assert QuotaStore(db).documents_stored(alice) == 3
    with db.session() as s:
        check_document_quota(s, alice, adding=2, limit=5)
        check_document_quota(s, alice, adding=0, limit=3)  # replacements only
        with pytest.raises(Refusal) as refused:
            check_document_quota(s, alice, adding=3, limit=5)
    assert refused.value.status == 413 and "3 of your quota of 5" in refused.value.detail


# -- the API ----------------------------------------------------------------------------------------------------


def _limit(app, client, **values) -> uuid.UUID:
    from agentsearch.pipeline.security.users import UserStore

    name = f"rl-{uuid.uuid4().hex[:8]}"
    user_id, key = UserStore(app.state.services.db).create(name)
    QuotaStore(app.state.services.db).set_overrides(name, LimitOverrides(**values))
    client.headers["Authorization"] = f"Bearer {key}"
    return user_id


def test_the_api_refuses_past_the_limit_before_the_route_writes(app, client):
    saved = client.headers["Authorization"]
    try:
        user_id = _limit(app, client, reads_per_minute=2)
        assert [client.post("/v1/collections", json={"name": f"c{i}"}).status_code for i in range(3)] == [201, 201, 429]
        with app.state.services.db.session() as s:
            from sqlalchemy import func, select

            owned = select(func.count()).select_from(CollectionRow).where(CollectionRow.user_id == user_id)
            assert s.scalar(owned) == 2
        refused = client.get("/v1/jobs")
        assert refused.status_code == 429 and refused.headers["RateLimit-Remaining"] == "0"
        assert int(refused.headers["Retry-After"]) >= 1
        # The probes are never limited and carry no RateLimit fields.
        health = client.get("/healthz")
        assert health.status_code == 200 and "RateLimit-Limit" not in health.headers
    finally:
        client.headers["Authorization"] = saved


def test_me_answers_for_the_caller(app, client):
    me = client.get("/v1/me")
    assert me.status_code == 200, me.text
    body = me.json()
    assert set(body["limits"]) == set(Limits.model_fields)
    assert body["usage"]["reads"]["used"] >= 1 and body["usage"]["running_jobs"] == 0
    assert body["counters_shared"] is False  # embedded: counted in this process
    assert me.headers["RateLimit-Limit"] == str(body["limits"]["reads_per_minute"])


# -- the operator's command -------------------------------------------------------------------------------------


def test_the_users_limits_command_sets_shows_and_resets(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from agentsearch.cli import main
    from agentsearch.pipeline.platform.settings import get_settings

    monkeypatch.setenv("AGENTSEARCH_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("AGENTSEARCH_RATE_LIMIT_READS_PER_MINUTE", "900")
    get_settings.cache_clear()
    try:
        runner = CliRunner()
        assert runner.invoke(main, ["users", "create", "carol"]).exit_code == 0
        set_ = runner.invoke(main, ["users", "limits", "carol", "--searches-per-minute", "5", "--max-documents", "0"])
        assert set_.exit_code == 0, set_.output
        rows = {line.split()[0]: line.split()[1:] for line in set_.output.splitlines()[1:]}
        assert rows["searches_per_minute"] == ["5", "set", "for", "this", "user"]
        assert rows["max_documents"][0] == "0" and rows["reads_per_minute"] == ["900", "default"]
        shown = runner.invoke(main, ["users", "limits", "carol"])
        assert shown.output == set_.output  # no option: the same limits, printed
        reset = runner.invoke(main, ["users", "limits", "carol", "--reset"])
        assert "set for this user" not in reset.output
        missing = runner.invoke(main, ["users", "limits", "nobody", "--max-running-jobs", "1"])
        assert missing.exit_code == 2 and "no user named 'nobody'" in missing.output
        negative = runner.invoke(main, ["users", "limits", "carol", "--reads-per-minute", "-1"])
        assert negative.exit_code == 2 and "--reads-per-minute" in negative.output
    finally:
        get_settings.cache_clear()


def test_the_middleware_adds_the_window_and_gives_back_an_admission_even_when_the_route_fails():
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from agentsearch.api.rate_limits import STATE_ADMISSION, STATE_WINDOW, RateLimitHeaders

    windows = RateWindows(None)
    user = uuid.uuid4()
    admissions = []

    def route(request: Request):
        admission = windows.admit_job(user, 1, running=lambda: 0)
        assert admission.admitted  # the previous request's place was given back
        admissions.append(admission)
        setattr(request.state, STATE_ADMISSION, admission)
        setattr(request.state, STATE_WINDOW, Window(limit=9, remaining=4, reset_s=30))
        if request.query_params.get("fail"):
            raise RuntimeError("the route failed")
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/r", route)])
    app.add_middleware(RateLimitHeaders)
    with TestClient(app, raise_server_exceptions=False) as client:
        answer = client.get("/r")
        assert answer.headers["RateLimit-Limit"] == "9" and answer.headers["RateLimit-Remaining"] == "4"
        assert client.get("/r", params={"fail": 1}).status_code == 500
        assert client.get("/r").status_code == 200
    assert len(admissions) == 3
