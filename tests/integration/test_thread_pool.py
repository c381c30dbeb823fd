"""A thread-pool worker (``agentsearch worker --pool threads``): one process runs many jobs' steps at once.

The stack is the layout docs/deployment.md gives: a thread-pool worker on the job's queue (``celery``) and a prefork
worker on the CPU-heavy queues (``artifacts``, ``ingest``). Fifty jobs are in flight at once in the thread pool,
sharing its breakers, caches, database pool and step ledger; each must come back with its own query, its own
document and its own answer. Agents that hang past their deadline are abandoned, counted in ``/metrics``, and past
the cap the worker finishes its steps and starts afresh in the same process.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from itertools import product

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentsearch.devstack import DevStack

pytestmark = pytest.mark.integration

THREADS = 64
ABANDONED_CAP = 3
JOBS = 50
# Made-up station names: distinct words, so each question has exactly one right document.
NAMES = ["".join(parts) for parts in product(("bal", "kor", "min", "tes", "vur"), ("do", "ka", "ri", "su", "te"),
                                               ("n", "x"))][:JOBS]
AGENTS = ["bench_sleep_pre", "acronym_resolver", "bench_sleep_post", "reranker"]


def megawatt_hours(i: int) -> int:
    return 4000 + 37 * i


@pytest.fixture(scope="module")
def pool_stack(tmp_path_factory):
    env = {"AGENTSEARCH_AGENT_MODULES": json.dumps(["agentsearch.bench.agents", "tests.chaos.agents"]),
           "AGENTSEARCH_WORKER_MAX_ABANDONED_THREADS": str(ABANDONED_CAP)}
    with DevStack(tmp_path_factory.mktemp("thread-pool"), workers=1, pool="threads", queues="celery",
                  concurrency=THREADS, user="pool-user", extra_env=env) as stack:
        index = stack.add_worker(queues="artifacts,ingest", concurrency=1, pool="prefork")
        stack.wait_worker_ready(index)
        documents = [{"id": f"station-{i}", "title": f"The {name} station in 2025",
                      "text": f"The {name} station generated {megawatt_hours(i)} megawatt hours in 2025. Its "
                              f"operators credit the {name} turbines, serviced twice that year."}
                     for i, name in enumerate(NAMES)]
        stack.collection_id = stack.ingest("stations", documents)
        yield stack


def _finished(http: httpx.Client, job_ids: list[str], timeout_s: float) -> dict[str, dict]:
    done: dict[str, dict] = {}
    deadline = time.monotonic() + timeout_s
    while len(done) < len(job_ids) and time.monotonic() < deadline:
        for job_id in job_ids:
            if job_id not in done:
                job = http.get(f"/v1/jobs/{job_id}").json()
                if job["status"] in ("succeeded", "failed", "cancelled"):
                    done[job_id] = job
        time.sleep(0.5)
    return done


def most_at_once(jobs: list[dict]) -> int:
    """The most jobs running at the same moment, from their rows' start and end."""
    edges = sorted([(datetime.fromisoformat(j["started_at"]), 1) for j in jobs]
                   + [(datetime.fromisoformat(j["finished_at"]), -1) for j in jobs])
    running = best = 0
    for _, step in edges:
        running += step
        best = max(best, running)
    return best


def test_fifty_jobs_in_flight_in_one_thread_pool_each_get_their_own_answer(pool_stack):
    questions = {i: f"How many megawatt hours did the {name} station generate in 2025?" for i, name in enumerate(NAMES)}
    with pool_stack.http(timeout_s=60) as http:
        def submit(i: int) -> str:
            response = http.post("/v1/search", json={"collection_id": pool_stack.collection_id, "query": questions[i],
                                                     "agents": AGENTS, "use_cache": False})
            assert response.status_code == 202, response.text
            return response.json()["job_id"]

        with ThreadPoolExecutor(8) as pool:
            job_ids = list(pool.map(submit, range(JOBS)))
        finished = _finished(http, job_ids, timeout_s=240)

    assert len(finished) == JOBS
    jobs = [finished[job_id] for job_id in job_ids]
    # Each job holds its thread through two 1-s agents: with a process per job step they would run a few at a time.
    assert most_at_once(jobs) >= 25, most_at_once(jobs)
    for i, job in enumerate(jobs):
        assert job["status"] == "succeeded", job["error"]
        response = job["response"]
        assert response["query"] == questions[i]
        assert response["sources"][0]["document_id"] == f"station-{i}", response["sources"]
        assert str(megawatt_hours(i)) in response["answer"], response["answer"]
        # Exactly its own agents' records, once each: nothing of another job's ledger or state.
        assert sorted(a["agent_id"] for a in response["agents"]) == sorted(AGENTS)
        assert {a["status"] for a in response["agents"]} <= {"ok", "skipped"}  # no acronym to resolve: skipped
        # Every step of every job ran in the one thread-pool process.
        assert len({a["worker"] for a in response["agents"]}) == 1


def _metrics(stack) -> dict[tuple[str, str], float]:
    text = httpx.get(f"{stack.api_url}/metrics", timeout=10).text
    return {(sample.name, sample.labels.get("worker", "")): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples
            if sample.name.startswith("agentsearch_worker_")}


def _worker_pid(stack) -> int:
    return stack.worker_procs[0].pid


def test_hung_agents_are_abandoned_at_their_deadline_and_the_worker_starts_afresh_past_the_cap(pool_stack):
    pid = _worker_pid(pool_stack)
    log = pool_stack.logs["worker-0"]
    lines_before = len(log.read_text().splitlines())
    with pool_stack.http(timeout_s=60) as http:
        created = http.post("/v1/agent-configs", json={"agent_id": "chaos_hang", "timeout_s": 1.0})
        assert created.status_code == 201, created.text
        hang = created.json()["id"]
        collection = http.post("/v1/collections", json={"name": "hangs"}).json()["id"]
        assert http.put(f"/v1/collections/{collection}/agents",
                        json={"agents": [{"agent_config_id": hang}]}).status_code == 200

        def run(query: str) -> dict:
            response = http.post("/v1/search", json={"collection_id": collection, "query": query, "use_cache": False})
            assert response.status_code == 202, response.text
            return _finished(http, [response.json()["job_id"]], timeout_s=120)[response.json()["job_id"]]

        # Below the cap: each hung agent costs its job the agent's timeout, and its thread is counted.
        below = [run(f"hang {i}") for i in range(ABANDONED_CAP - 1)]
        for job in below:
            assert job["status"] == "succeeded", job["error"]
            assert [a["status"] for a in job["response"]["agents"]] == ["timeout"]
            seconds = (datetime.fromisoformat(job["finished_at"]) - datetime.fromisoformat(job["created_at"]))
            # The 1 s timeout and the rest of the job: never the hung agent, nor the 30 s default timeout.
            assert seconds.total_seconds() < 15, seconds
        worker = next(w for (_, w) in _metrics(pool_stack) if w.endswith(f":{pid}"))
        assert _metrics(pool_stack)[("agentsearch_worker_abandoned_threads", worker)] == ABANDONED_CAP - 1

        # The cap: the worker finishes its steps and starts again, in the same process.
        reaching = run("hang at the cap")
        assert reaching["status"] == "succeeded", reaching["error"]
        deadline = time.monotonic() + 90
        while "starting afresh" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert "starting afresh" in log.read_text()
        started_again = time.monotonic() + 120
        while time.monotonic() < started_again:
            if [line for line in log.read_text().splitlines()[lines_before:] if "ready." in line]:
                break
            time.sleep(0.5)
        assert pool_stack.worker_procs[0].poll() is None and _worker_pid(pool_stack) == pid
        figures = _metrics(pool_stack)
        assert figures[("agentsearch_worker_recycles_total", worker)] == 1
        assert figures[("agentsearch_worker_abandoned_threads", worker)] == 0

        # And it serves jobs again.
        after = http.post("/v1/search?wait=60", json={"collection_id": pool_stack.collection_id,
                                                      "query": f"How much did the {NAMES[0]} station generate?"})
        assert after.status_code == 200 and after.json()["status"] == "succeeded", after.text
