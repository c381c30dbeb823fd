"""Drill 9: a rolling upgrade, the previous release's API and worker beside the current ones on one Redis and one
PostgreSQL, in the order docs/operations.md gives ("Upgrades").

The operator has migrated the database to head (the stack's ``agentsearch migrate``); the previous release (its code
from git, ``PREVIOUS_RELEASE``, on this checkout's environment) still serves the API and runs a worker node, and a
node of the current code has joined it, with the current beat running the reaper. Documents go in through the
release's API and are sent again once indexed; jobs are submitted through it while both nodes take their steps, so
a job's steps pass from one release's worker to the other's (each node sends the next step's message). Then the
release's node is stopped as the roll replaces it (SIGTERM: soft shutdown hands its messages back) with jobs in
flight, jobs go to the current API, and the release's API stops.

Promise: every job succeeds and none is lost, jobs ran on both releases' workers, every document ends indexed, and
documents sent again are indexed without waiting for the reaper. Figures: ``{"jobs", "succeeded", "failed", "lost",
"mixed_jobs", "steps_previous", "steps_current", "documents", "indexed", "resent_indexed_s"}``.
"""

from __future__ import annotations

import json
import signal
import socket
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx

from agentsearch.devstack import DevStack, free_port, start_process, stop_process, wait_for
from agentsearch.pipeline.job.job_store import ORPHAN_GRACE_S
from tests.chaos.harness import SAMPLE_CORPUS, TERMINAL, record, submit, wait_until
from tests.support.previous_release.tree import release_command, release_tree

JOBS_PER_PHASE = 20
AGENTS = ["language_detector", "deduplicator", "executive_summary"]
QUERIES = ["What was Northwind Energy's revenue in Q4 2025?", "solar output", "Which suppliers failed audits?"]


def wait_indexed(http: httpx.Client, collection_id: str, timeout_s: float = 300) -> dict:
    deadline = time.monotonic() + timeout_s
    while (counts := http.get(f"/v1/collections/{collection_id}").json()["documents"])["pending"]:
        assert time.monotonic() < deadline, f"indexing stuck: {counts}"
        time.sleep(0.5)
    return counts


def wait_all(http: httpx.Client, job_ids: list[str], timeout_s: float = 300) -> dict[str, dict]:
    deadline, jobs = time.monotonic() + timeout_s, {}
    while time.monotonic() < deadline and len(jobs) < len(job_ids):
        for job_id in job_ids:
            if job_id not in jobs and (job := http.get(f"/v1/jobs/{job_id}").json())["status"] in TERMINAL:
                jobs[job_id] = job
        time.sleep(0.5)
    return jobs


def test_the_previous_release_and_the_current_one_side_by_side(tmp_path):
    tree = str(release_tree(tmp_path / "release"))
    with DevStack(tmp_path / "stack", workers=1, concurrency=2, beat=True, user="rolling") as stack:
        release_env = {**stack.env, "PYTHONPATH": tree}
        index = len(stack.worker_procs)
        stack.logs[f"worker-{index}"] = log = stack.workdir / f"worker-{index}.log"
        stack.worker_names.append(f"release-{uuid.uuid4().hex[:4]}@{socket.gethostname()}")
        stack.worker_procs.append(start_process(
            [*release_command(), "worker", "--pool", "prefork", "--concurrency", "2", "--queues", stack.queues,
             "--loglevel", "INFO", "--hostname", stack.worker_names[-1]], release_env, log))
        stack.wait_worker_ready(index)
        # The release's code, not this checkout's: it has no document reaper task.
        assert "agentsearch.reap_documents" not in log.read_text()
        assert "agentsearch.reap_documents" in stack.logs["worker-0"].read_text()
        release_url = f"http://127.0.0.1:{free_port()}"
        release_api = start_process([*release_command(), "api", "--host", "127.0.0.1", "--port",
                                     release_url.rsplit(":", 1)[1]], release_env, stack.workdir / "release-api.log")
        try:
            wait_for(lambda: httpx.get(f"{release_url}/readyz").status_code == 200, 90, "release api", release_api,
                     stack.workdir / "release-api.log")
            figures = _drill(stack, index, release_url, release_api)
        finally:
            stop_process(release_api)
    record("rolling_upgrade", figures)
    assert figures["lost"] == 0 and figures["failed"] == 0 and figures["succeeded"] == figures["jobs"]
    assert figures["mixed_jobs"] > 0 and figures["steps_previous"] > 0 and figures["steps_current"] > 0
    assert figures["indexed"] == figures["documents"] and figures["resent_indexed_s"] < ORPHAN_GRACE_S


def _drill(stack: DevStack, release_index: int, release_url: str, release_api) -> dict:
    documents = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
    headers = {"Authorization": f"Bearer {stack.api_key}"}
    with httpx.Client(base_url=stack.api_url, timeout=30, headers=headers) as current, \
            httpx.Client(base_url=release_url, timeout=30, headers=headers) as previous:
        # Both releases' nodes run; requests still reach only the release's API (the API rolls last).
        collection_id = previous.post("/v1/collections", json={"name": "rolling"}).json()["id"]
        assert previous.post(f"/v1/collections/{collection_id}/documents",
                             json={"documents": documents}).status_code == 202
        wait_indexed(current, collection_id)
        # Sent again: those the current node indexed hold its task's id; it must take them all the same, at once
        # (not after the reaper's grace).
        resent_at = time.monotonic()
        assert previous.post(f"/v1/collections/{collection_id}/documents",
                             json={"documents": documents}).status_code == 202
        counts = wait_indexed(current, collection_id)
        resent_s = time.monotonic() - resent_at

        def run(client: httpx.Client, n: int) -> str | None:
            body = {"collection_id": collection_id, "query": f"{QUERIES[n % len(QUERIES)]} {n}", "agents": AGENTS,
                    "use_cache": False}
            return submit(client, body, key=str(uuid.uuid4()), retry_until=time.monotonic() + 60)[0]

        # The release node's pool processes: an agent's record names the process that ran it.
        release_pids = set(stack.worker_children(release_index))

        def release_took_a_step(job_ids: list[str]) -> bool:
            release_pids.update(stack.worker_children(release_index))  # a pool process may have been replaced
            return any(int(run["worker"].rsplit(":", 1)[1]) in release_pids
                       for (runs,) in stack.sql("SELECT agent_runs FROM jobs WHERE id = ANY(%s::uuid[])", job_ids)
                       for run in runs or [] if run.get("worker"))

        with ThreadPoolExecutor(8) as pool:
            mixed = list(pool.map(lambda n: run(previous, n), range(JOBS_PER_PHASE)))
            # The release's node goes once it has run a step of these jobs: their other steps run on the current one.
            wait_until(lambda: release_took_a_step([j for j in mixed if j]), 120,
                       "a step of the first jobs run by the previous release's node")
            stack.kill_worker(release_index, signal.SIGTERM)  # the roll replaces the release's node, jobs in flight
            rolled = list(pool.map(lambda n: run(current, n), range(JOBS_PER_PHASE, 2 * JOBS_PER_PHASE)))
        stop_process(release_api)  # the API last
        job_ids = [j for j in mixed + rolled if j]
        jobs = wait_all(current, job_ids)
    steps = [(job_id, int(run["worker"].rsplit(":", 1)[1]) in release_pids) for job_id, job in jobs.items()
             for run in job["agents"] if run.get("worker")]
    on_release, on_current = ({job_id for job_id, released in steps if released == side} for side in (True, False))
    return {"jobs": 2 * JOBS_PER_PHASE, "succeeded": sum(j["status"] == "succeeded" for j in jobs.values()),
            "failed": sum(j["status"] == "failed" for j in jobs.values()), "lost": 2 * JOBS_PER_PHASE - len(jobs),
            "mixed_jobs": len(on_release & on_current), "steps_previous": sum(released for _, released in steps),
            "steps_current": sum(not released for _, released in steps), "documents": len(documents),
            "indexed": counts["indexed"], "resent_indexed_s": round(resent_s, 1)}
