"""The API's side of the trust boundary, on the real stack: one user's requests never stall, flood or read another's,
and bad input is refused where it enters, naming the field, with nothing written.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from agentsearch.devstack import BIN, REPO, free_port, start_process, stop_process, wait_for
from agentsearch.pipeline.security.users import SHOWN_CHARS
from tests.integration.conftest import own_collection, runs_by_agent, search, use_agents, wait_job
from tests.support.events import read_events


def counts(stack) -> tuple[int, int, int, int]:
    (row,) = stack.sql("SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM agent_configs), "
                       "(SELECT count(*) FROM collections), (SELECT count(*) FROM documents)")
    return row


def post_raw(http: httpx.Client, path: str, body: dict) -> httpx.Response:
    """JSON as Python writes it: lone surrogates escaped as \\ud800, NaN and Infinity as literals."""
    return http.post(path, content=json.dumps(body).encode("ascii"), headers={"Content-Type": "application/json"})


def locs(response: httpx.Response) -> list[list]:
    return [d["loc"] for d in response.json()["detail"]]


# -- tenancy --------------------------------------------------------------------------------------------------


def test_one_users_agent_limits_never_open_the_circuit_for_another_user(stack, collection):
    """Finding 4: a user's tiny deadline and fail_max 1 on an agent opened its breaker for every user."""
    # What the breaker was keyed on: the agent and its config, not its limits. A second: far past A's deadline
    # (0.05 s), far inside B's (5 s).
    same_config = {"sleep_s": 1.0}
    with stack.http() as a:
        use_agents(a, collection, {"agent_id": "test_sleepy", "name": f"tight-{uuid.uuid4().hex[:6]}",
                                   "config": same_config, "timeout_s": 0.05, "breaker_fail_max": 1,
                                   "breaker_reset_timeout_s": 600})
        first = search(a, collection, f"Which wind farms? {uuid.uuid4().hex[:6]}", use_cache=False)
        second = search(a, collection, f"Which wind farms? {uuid.uuid4().hex[:6]}", use_cache=False)
        use_agents(a, collection)  # A's collection back to no agents for the tests after this one
    assert runs_by_agent(first)["test_sleepy"]["status"] == "timeout"
    assert runs_by_agent(second)["test_sleepy"]["status"] == "circuit_open"  # A's own circuit did open
    key_b = stack.create_user(f"breaker-b-{uuid.uuid4().hex[:6]}")
    with stack.http(key_b) as b:
        own = own_collection(b, "b-docs", [{"id": "b1", "title": "Tides", "text": "Tidal power in the Bay of Fundy."}])
        use_agents(b, own, {"agent_id": "test_sleepy", "config": same_config, "timeout_s": 5})
        job = search(b, own, "tidal power", use_cache=False)
    assert job["status"] == "succeeded"
    assert runs_by_agent(job)["test_sleepy"]["status"] == "ok", job["response"]["agents"]


# -- availability ---------------------------------------------------------------------------------------------


def test_many_waiting_requests_do_not_stall_other_users(stack, collection):
    """Finding 5: 45 parallel ?wait requests held the API's worker threads and stalled every other client."""
    waiters = []
    for i in range(3):
        key = stack.create_user(f"waiter-{i}-{uuid.uuid4().hex[:6]}")
        with stack.http(key) as http:
            own = own_collection(http, "slow")
            use_agents(http, own, {"agent_id": "test_sleepy", "config": {"sleep_s": 2}, "timeout_s": 5})
        waiters.append((key, own))
    bystander = stack.create_user(f"bystander-{uuid.uuid4().hex[:6]}")
    job_ids: list[str] = []

    def wait_on_job(item: tuple[str, str]) -> int:
        key, own = item
        with stack.http(key, timeout_s=60) as http:
            response = http.post("/v1/search", params={"wait": 12},
                                 json={"collection_id": own, "query": f"slow {uuid.uuid4().hex}", "use_cache": False})
        job_ids.append(response.json()["job_id"])
        return response.status_code

    latencies = []
    with ThreadPoolExecutor(45) as pool:
        waiting = [pool.submit(wait_on_job, waiters[i % 3]) for i in range(45)]
        # The waits have begun: most of the requests wrote their job's row and wait on it.
        deadline = time.monotonic() + 60
        while stack.sql("SELECT count(*) FROM jobs WHERE collection_id IN (%s, %s, %s)",
                        *(own for _, own in waiters))[0][0] < 30:
            assert time.monotonic() < deadline, "the waiting requests never wrote their jobs"
            time.sleep(0.1)
        with stack.http(bystander) as http:
            for _ in range(10):
                started = time.monotonic()
                assert http.get("/v1/collections").status_code == 200
                latencies.append(time.monotonic() - started)
                time.sleep(0.3)
        statuses = [f.result() for f in waiting]
    with stack.http() as http:
        for job_id in job_ids:
            http.delete(f"/v1/jobs/{job_id}")  # the worker need not sleep through the rest
    assert set(statuses) <= {200, 202}
    # Before, every one of these waited for the waits to end (about 10 s).
    assert max(latencies) < 5.0, latencies


def test_a_users_waits_past_its_share_are_answered_at_once(stack):
    key = stack.create_user(f"greedy-{uuid.uuid4().hex[:6]}")
    with stack.http(key) as http:
        own = own_collection(http, "slow")
        # Longer than the waits below: no job can end while they wait.
        use_agents(http, own, {"agent_id": "test_sleepy", "config": {"sleep_s": 8}, "timeout_s": 10})
    per_user = 16  # AGENTSEARCH_MAX_WAITS_PER_USER's default

    def wait_on_job(_: int) -> tuple[int, float, str]:
        started = time.monotonic()
        with stack.http(key, timeout_s=60) as http:
            response = http.post("/v1/search", params={"wait": 6},
                                 json={"collection_id": own, "query": f"slow {uuid.uuid4().hex}", "use_cache": False})
        return response.status_code, time.monotonic() - started, response.json()["job_id"]

    with ThreadPoolExecutor(per_user + 4) as pool:
        answers = list(pool.map(wait_on_job, range(per_user + 4)))
    with stack.http(key) as http:
        for _, _, job_id in answers:
            http.delete(f"/v1/jobs/{job_id}")
        # An event stream is a wait too: with the share free again, one is admitted.
        with http.stream("GET", f"/v1/jobs/{answers[0][2]}/events") as stream:
            assert stream.status_code == 200
    quick = [status for status, seconds, _ in answers if seconds < 3]
    assert quick == [202] * 4, answers  # the four past the share answered at once; the rest waited their 6 s
    assert all(status == 202 for status, _, _ in answers)


def test_a_body_over_the_limit_is_refused_before_it_is_read(stack):
    """Finding 6: a 150 MB body was read whole (RSS 310 -> 595 MB) before it was refused."""
    rss_before = _rss_mb(stack.api_proc.pid)
    announced = 150 * 1024 * 1024
    with socket.create_connection(("127.0.0.1", int(stack.api_url.rsplit(":", 1)[1])), timeout=10) as sock:
        sock.sendall((f"POST /v1/collections HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {stack.api_key}\r\n"
                      f"Content-Type: application/json\r\nContent-Length: {announced}\r\n\r\n").encode()
                     + b'{"name": "' + b"x" * 65536)
        # Answered while almost all of the body is still unsent.
        reply = sock.recv(4096).decode(errors="replace")
    assert reply.startswith("HTTP/1.1 413"), reply[:200]
    # Without a Content-Length (chunked), the limit applies to what arrives.
    with stack.http() as http:
        chunked = http.post("/v1/collections", headers={"Content-Type": "application/json"},
                            content=(b"x" * 1024 * 1024 for _ in range(20)))
    assert chunked.status_code == 413, chunked.text[:200]
    assert _rss_mb(stack.api_proc.pid) - rss_before < 50


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_a_revoked_key_stops_working_at_once(stack):
    """Finding 7: a revoked key kept working for up to 10 s in each API process."""
    key = stack.create_user(f"leaky-{uuid.uuid4().hex[:6]}")
    with stack.http(key) as http:
        assert http.get("/v1/jobs").status_code == 200  # verified (and, before, remembered)
        stack.cli("users", "revoke", key[:SHOWN_CHARS])
        assert http.get("/v1/jobs").status_code == 401


def test_an_open_event_stream_ends_when_its_key_is_revoked(stack):
    """An event stream opened before its key was revoked kept sending for the rest of the job."""
    key = stack.create_user(f"streamer-{uuid.uuid4().hex[:6]}")
    with stack.http(key, timeout_s=60) as http:
        own = own_collection(http, "slow")
        # Far longer than the revocation (a CLI command, seconds on a loaded machine) and the stream's key check
        # (2 s) together: the job is still running when its stream ends.
        use_agents(http, own, {"agent_id": "test_sleepy", "config": {"sleep_s": 30}, "timeout_s": 40})
        submitted = http.post("/v1/search", json={"collection_id": own, "query": f"slow {uuid.uuid4().hex}",
                                                  "use_cache": False})
        assert submitted.status_code == 202, submitted.text
        job_id = submitted.json()["job_id"]

        def revoke_at_the_first(events: list) -> None:
            if len(events) == 1:  # the stream is open and sending: now the key goes
                stack.cli("users", "revoke", key[:SHOWN_CHARS])

        events = [(name, data) for _, name, data in read_events(http, job_id, revoke_at_the_first)]
    [(status,)] = stack.sql("SELECT status FROM jobs WHERE id = %s", job_id)
    assert events[-1] == ("error", {"status": 401, "detail": "the API key is no longer valid; the stream ends"})
    assert "done" not in [name for name, _ in events]
    assert status not in ("succeeded", "failed", "cancelled")  # the key ended the stream, not the job


def test_readyz_tells_anonymous_callers_no_addresses(stack, tmp_path):
    """Finding 15: a failing check's error text named Redis's and the broker's addresses."""
    dead = free_port()
    port = free_port()
    env = {**stack.env, "AGENTSEARCH_REDIS_URL": f"redis://127.0.0.1:{dead}/0",
           "AGENTSEARCH_BROKER_URL": f"redis://127.0.0.1:{dead}/1"}
    log = tmp_path / "api.log"
    proc = start_process([str(BIN / "agentsearch"), "api", "--host", "127.0.0.1", "--port", str(port)], env, log)
    try:
        wait_for(lambda: httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200, 60, "api", proc, log)
        response = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=30)
    finally:
        stop_process(proc)
    assert response.status_code == 503
    assert response.json() == {"status": "not ready",
                               "checks": {"database": "ok", "redis": "unavailable", "broker": "unavailable"}}
    assert str(dead) in log.read_text()  # the operator finds the details in the log


# -- bad input ------------------------------------------------------------------------------------------------


def test_lone_surrogates_are_refused_naming_the_field(stack, collection):
    """Finding 8: a lone UTF-16 surrogate in a query, document text, collection name or config name was a 500."""
    before = counts(stack)
    with stack.http() as http:
        cases = [
            ("/v1/search", {"collection_id": collection, "query": "wind \ud800"}, ["body", "query"]),
            (f"/v1/collections/{collection}/documents",
             {"documents": [{"id": "s1", "text": "ok"}, {"id": "s2", "text": "bad \udfff"}]},
             ["body", "documents", 1, "text"]),
            ("/v1/collections", {"name": "n\ud800"}, ["body", "name"]),
            ("/v1/agent-configs", {"agent_id": "deduplicator", "name": "\ud83d"}, ["body", "name"]),
            ("/v1/agent-configs", {"agent_id": "acronym_resolver", "config": {"acronyms": {"\ud800": "x"}}},
             ["body", "config", "acronyms", "<key 0>"]),
        ]
        for path, body, loc in cases:
            response = post_raw(http, path, body)
            assert response.status_code == 422, (path, response.text)
            assert loc in locs(response), response.text
    assert counts(stack) == before


def test_non_finite_numbers_are_refused_naming_the_field(stack, collection):
    """Finding 9: recency_half_life_days Infinity (and NaN) was accepted; the job then failed in core_search."""
    before = counts(stack)
    with stack.http() as http:
        for value in (float("inf"), float("nan"), float("-inf")):
            response = post_raw(http, "/v1/search", {"collection_id": collection, "query": "wind",
                                                     "search": {"recency_half_life_days": value}})
            assert response.status_code == 422, response.text
            assert ["body", "search", "recency_half_life_days"] in locs(response)
        overflow = http.post("/v1/search", headers={"Content-Type": "application/json"},
                             content=b'{"collection_id": "%s", "query": "w", "top_k": 1e999}' % collection.encode())
        assert overflow.status_code == 422 and ["body", "top_k"] in locs(overflow), overflow.text
    assert counts(stack) == before


def test_validation_errors_do_not_echo_the_input(stack):
    """Finding 17: a 422 carried the whole input back (the 150 MB body came back in the answer)."""
    with stack.http() as http:
        response = http.post("/v1/collections", json={"name": "n" * 2_000_000})
    assert response.status_code == 422
    assert len(response.content) < 2000, len(response.content)
    assert ["body", "name"] in locs(response)
    assert "input" not in response.json()["detail"][0]


def test_concurrent_replacements_of_a_collections_agents_never_fail(stack):
    """Finding 10: 20 concurrent PUT /v1/collections/{id}/agents with the same body gave 10 x 500."""
    with stack.http() as http:
        own = own_collection(http, f"agents-race-{uuid.uuid4().hex[:6]}")
        configs = [http.post("/v1/agent-configs", json={"agent_id": a}).json()["id"]
                   for a in ("language_detector", "deduplicator")]
    body = {"agents": [{"agent_config_id": c} for c in configs]}

    def put(_: int) -> int:
        with stack.http() as http:
            return http.put(f"/v1/collections/{own}/agents", json=body).status_code

    with ThreadPoolExecutor(20) as pool:
        statuses = list(pool.map(put, range(20)))
    assert statuses == [200] * 20
    assert sorted(str(r[0]) for r in stack.sql(
        "SELECT agent_config_id FROM collection_agents WHERE collection_id = %s", own)) == sorted(configs)


def test_ingest_of_a_file_with_a_bad_line_past_the_first_batch_stores_nothing(stack, tmp_path):
    """Finding 11: a file whose second batch was refused left the first 256 documents stored."""
    for bad_line, why in ((json.dumps({"id": "d-299", "text": "a\u0000b"}), "NUL"),
                          (json.dumps({"id": "d-5", "text": "again"}), "repeats line 6")):
        name = f"half-{uuid.uuid4().hex[:6]}"
        lines = [json.dumps({"id": f"d-{i}", "title": f"Doc {i}", "text": f"Document number {i}."})
                 for i in range(299)] + [bad_line]
        path = tmp_path / f"{name}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        done = subprocess.run([str(BIN / "agentsearch"), "ingest", str(path), "--collection", name], cwd=REPO,
                              env=stack.env, capture_output=True, text=True)
        assert done.returncode != 0
        assert "line 300" in done.stderr and why in done.stderr, done.stderr
        assert stack.sql("SELECT count(*) FROM documents d JOIN collections c ON c.id = d.collection_id "
                         "WHERE c.name = %s", name) == [(0,)]


def test_cached_waits_and_jobs_still_work_for_the_same_user(stack, collection):
    """The waits moved off the threads: a waiting request still gets the finished job."""
    with stack.http() as http:
        response = http.post("/v1/search", params={"wait": 60},
                             json={"collection_id": collection, "query": f"solar {uuid.uuid4().hex[:6]}",
                                   "agents": [], "use_cache": False})
        assert response.status_code == 200, response.text
        assert response.json()["status"] == "succeeded"
        assert wait_job(http, response.json()["job_id"])["status"] == "succeeded"
