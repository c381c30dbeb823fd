"""Per-user rate limits and quotas on the real stack: limits an operator sets with `agentsearch users limits`,
counted in Redis by every API process, refused before anything is written, and one user's never another's."""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import redis

from tests.integration.conftest import extra_api, free_port, use_agents, wait_job

pytestmark = pytest.mark.integration

DOCS = [{"id": "t1", "title": "Tides", "text": "Tidal power in the Bay of Fundy reached 20 MW in 2025."},
        {"id": "t2", "title": "Wind", "text": "The Northwind farm added eight turbines in 2025."}]


def _user(stack, prefix: str, *limits: str) -> tuple[str, str, str]:
    """A fresh user with the given `users limits` options: (name, key, user id)."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    key = stack.create_user(name)
    if limits:
        stack.cli("users", "limits", name, *limits)
    user_id = stack.sql("SELECT id::text FROM users WHERE name = %s", name)[0][0]
    return name, key, user_id


def _indexed_collection(http: httpx.Client, name: str, documents: list[dict]) -> str:
    created = http.post("/v1/collections", json={"name": name})
    assert created.status_code == 201, created.text
    collection_id = created.json()["id"]
    assert http.post(f"/v1/collections/{collection_id}/documents", json={"documents": documents}).status_code == 202
    deadline = time.monotonic() + 60
    while http.get(f"/v1/collections/{collection_id}").json()["documents"]["pending"]:
        assert time.monotonic() < deadline, "indexing stuck"
        time.sleep(0.2)
    return collection_id


def _jobs_of(stack, user_id: str) -> int:
    return stack.sql("SELECT count(*) FROM jobs WHERE user_id = %s::uuid", user_id)[0][0]


def _documents_of(stack, user_id: str) -> int:
    return stack.sql("SELECT count(*) FROM documents d JOIN collections c ON c.id = d.collection_id "
                     "WHERE c.user_id = %s::uuid", user_id)[0][0]


def _assert_refused(response: httpx.Response, limit: int) -> None:
    assert response.status_code == 429, response.text
    assert 1 <= int(response.headers["Retry-After"]) <= 60
    assert response.headers["RateLimit-Limit"] == str(limit)
    assert response.headers["RateLimit-Remaining"] == "0"
    assert 1 <= int(response.headers["RateLimit-Reset"]) <= 60


@pytest.fixture(scope="module")
def second_api(stack):
    """Another API process on the stack's environment (Redis, database): a second replica behind a balancer."""
    with extra_api(stack.env, stack.workdir / "api-2.log") as url:
        yield url


def test_searches_past_the_limit_are_refused_with_the_headers_and_create_no_job(stack):
    _, key, user_id = _user(stack, "burst", "--searches-per-minute", "3")
    with stack.http(key) as http:
        collection_id = _indexed_collection(http, "burst", DOCS)
        body = {"collection_id": collection_id, "query": "tidal power", "agents": [], "use_cache": False}
        with ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(lambda _: http.post("/v1/search", json=body), range(6)))
        accepted = [a for a in answers if a.status_code == 202]
        refused = [a for a in answers if a.status_code != 202]
        assert len(accepted) == 3, [a.status_code for a in answers]
        for answer in refused:
            _assert_refused(answer, 3)
        # An accepted request carries its window too.
        assert {a.headers["RateLimit-Limit"] for a in accepted} == {"3"}
        assert {a.headers["RateLimit-Remaining"] for a in accepted} <= {"0", "1", "2"}
        for answer in accepted:
            assert wait_job(http, answer.json()["job_id"])["status"] == "succeeded"
        # Reads are a class of their own: the user can still read its jobs.
        assert http.get("/v1/jobs").json()["total"] == 3
    assert _jobs_of(stack, user_id) == 3  # the refused searches wrote no row


def test_two_api_processes_share_one_count(stack, second_api):
    name, key, user_id = _user(stack, "replicas", "--reads-per-minute", "6", "--ingest-per-minute", "2")
    first = stack.http(key)
    second = httpx.Client(base_url=second_api, timeout=30, headers={"Authorization": f"Bearer {key}"})
    with first, second:
        apis = [first, second]
        reads = [apis[i % 2].get("/v1/jobs") for i in range(8)]
        assert [r.status_code for r in reads] == [200] * 6 + [429] * 2
        assert [r.headers["RateLimit-Remaining"] for r in reads[:6]] == ["5", "4", "3", "2", "1", "0"]
        _assert_refused(reads[7], 6)
        # Ingestion is counted apart from reads, across both processes as well; a refused one stores nothing.
        stack.cli("users", "limits", name, "--reads-per-minute", "100")
        collection_id = first.post("/v1/collections", json={"name": "replicas"}).json()["id"]
        sent = [apis[i % 2].post(f"/v1/collections/{collection_id}/documents",
                                 json={"documents": [{"id": f"d{i}", "title": "t", "text": f"document {i}"}]})
                for i in range(3)]
        assert [r.status_code for r in sent] == [202, 202, 429]
        _assert_refused(sent[2], 2)
    assert _documents_of(stack, user_id) == 2
    assert stack.sql("SELECT count(*) FROM documents WHERE external_id = 'd2' AND collection_id = %s::uuid",
                     collection_id) == [(0,)]


def test_a_search_past_the_running_jobs_limit_is_refused_until_one_ends(stack):
    _, key, user_id = _user(stack, "running", "--max-running-jobs", "2")
    with stack.http(key) as http:
        collection_id = _indexed_collection(http, "slow", DOCS)
        use_agents(http, collection_id, {"agent_id": "test_sleepy", "name": "slow", "config": {"sleep_s": 4}})
        body = {"collection_id": collection_id, "query": "tidal power", "use_cache": False}
        admissions = redis.Redis.from_url(stack.redis_url)
        with ThreadPoolExecutor(1) as pool:
            # A search that waits for its job counts once, by its row, while it waits: it gave its admission back.
            waiting = pool.submit(http.post, "/v1/search", params={"wait": 30}, json=body)
            deadline = time.monotonic() + 20
            while _jobs_of(stack, user_id) < 1 or int(admissions.get(f"agentsearch:limits:admissions/{user_id}") or 0):
                assert time.monotonic() < deadline, "the waiting search never wrote its job"
                time.sleep(0.05)
            second = http.post("/v1/search", json=body, headers={"Idempotency-Key": "second"})
            assert second.status_code == 202, second.text
            assert http.get("/v1/me").json()["usage"]["running_jobs"] == 2
            refused = http.post("/v1/search", json=body)
            assert refused.status_code == 429, refused.text
            assert int(refused.headers["Retry-After"]) > 0
            assert "at most 2" in refused.json()["detail"]
            assert _jobs_of(stack, user_id) == 2  # not queued: refused, with no row
            # Sending a submission again (same Idempotency-Key) starts nothing: it gets its job, even at the limit.
            again = http.post("/v1/search", json=body, headers={"Idempotency-Key": "second"})
            assert again.status_code == 200 and again.json()["job_id"] == second.json()["job_id"], again.text
            # One ends (cancelled here): the next search is admitted at once.
            assert http.delete(f"/v1/jobs/{second.json()['job_id']}").status_code == 202
            admitted = http.post("/v1/search", json=body)
            assert admitted.status_code == 202, admitted.text
            assert _jobs_of(stack, user_id) == 3
            finished = waiting.result(timeout=60)
        assert finished.status_code == 200 and finished.json()["status"] == "succeeded", finished.text
        assert wait_job(http, admitted.json()["job_id"], timeout_s=60)["status"] == "succeeded"


def test_me_shows_the_limits_in_force_and_the_usage(stack):
    name, key, user_id = _user(stack, "me", "--searches-per-minute", "7", "--max-documents", "50")
    with stack.http(key) as http:
        _indexed_collection(http, "mine", DOCS)
        me = http.get("/v1/me")
        assert me.status_code == 200, me.text
        body = me.json()
    assert body["user"] == {"id": user_id, "name": name}
    assert body["limits"]["searches_per_minute"] == 7 and body["limits"]["max_documents"] == 50
    assert body["limits"]["reads_per_minute"] == int(stack.env["AGENTSEARCH_RATE_LIMIT_READS_PER_MINUTE"])
    usage = body["usage"]
    assert usage["documents"] == 2 and usage["running_jobs"] == 0
    assert usage["ingest"]["used"] == 1 and usage["searches"] == {"limit": 7, "used": 0, "remaining": 7,
                                                                   "reset_s": 0}
    assert usage["reads"]["used"] >= 3  # the collection made, its polls, and this request
    assert body["counters_shared"] is True
    # The operator's command shows the same limits, and where each comes from.
    shown = stack.cli("users", "limits", name)
    assert "searches_per_minute" in shown and "set for this user" in shown and "default" in shown


def test_documents_past_the_quota_are_refused_and_none_is_stored(stack):
    _, key, user_id = _user(stack, "quota", "--max-documents", "3")
    with stack.http(key) as http:
        collection_id = _indexed_collection(http, "full", DOCS)
        over = http.post(f"/v1/collections/{collection_id}/documents",
                         json={"documents": [{"id": f"n{i}", "title": "t", "text": "new"} for i in range(2)]})
        assert over.status_code == 413, over.text
        assert "quota of 3" in over.json()["detail"]
        assert _documents_of(stack, user_id) == 2
        # Replacing documents already stored adds nothing to the count: accepted.
        assert http.post(f"/v1/collections/{collection_id}/documents", json={"documents": DOCS}).status_code == 202
        assert http.post(f"/v1/collections/{collection_id}/documents",
                         json={"documents": [{"id": "n0", "title": "t", "text": "new"}]}).status_code == 202
    assert _documents_of(stack, user_id) == 3


def test_one_users_limits_never_affect_another_user(stack):
    _, tight_key, _ = _user(stack, "tight", "--reads-per-minute", "2")
    _, other_key, _ = _user(stack, "other")
    with stack.http(tight_key) as tight, stack.http(other_key) as other:
        assert [tight.get("/v1/jobs").status_code for _ in range(3)] == [200, 200, 429]
        answers = [other.get("/v1/jobs") for _ in range(5)]
        assert {a.status_code for a in answers} == {200}
        assert answers[-1].headers["RateLimit-Limit"] == stack.env["AGENTSEARCH_RATE_LIMIT_READS_PER_MINUTE"]
        # Requests without a valid key count against nobody; the probes are never limited.
        with httpx.Client(base_url=stack.api_url, timeout=10) as anonymous:
            assert {anonymous.get("/v1/jobs", headers={"Authorization": "Bearer as_wrong"}).status_code
                    for _ in range(3)} == {401}
            assert {anonymous.get("/healthz").status_code for _ in range(5)} == {200}
        assert tight.get("/v1/jobs").status_code == 429
    with stack.http() as suite_user:
        assert suite_user.get("/v1/jobs").status_code == 200


def test_requests_pass_unlimited_while_the_counters_redis_is_away(stack):
    """Fail open: past a per-minute limit nobody can count, requests are served (never a 500) and the API says why
    in its log; the database's quotas still hold."""
    _, key, _ = _user(stack, "no-redis", "--reads-per-minute", "2", "--max-documents", "1")
    log = stack.workdir / "api-no-redis.log"
    nothing_listens = f"redis://127.0.0.1:{free_port()}/2"
    with extra_api({**stack.env, "AGENTSEARCH_REDIS_URL": nothing_listens}, log) as url, \
            httpx.Client(base_url=url, timeout=30, headers={"Authorization": f"Bearer {key}"}) as http:
        answers = [http.get("/v1/jobs") for _ in range(4)]
        assert [a.status_code for a in answers] == [200] * 4
        assert "RateLimit-Limit" not in answers[-1].headers
        me = http.get("/v1/me").json()
        assert me["limits"]["reads_per_minute"] == 2 and me["usage"]["reads"] is None
        collection_id = http.post("/v1/collections", json={"name": "no-redis"}).json()["id"]
        over = http.post(f"/v1/collections/{collection_id}/documents",
                         json={"documents": [{"id": f"x{i}", "title": "t", "text": "x"} for i in range(2)]})
        assert over.status_code == 413, over.text
    assert "rate limit counters unavailable" in log.read_text()
