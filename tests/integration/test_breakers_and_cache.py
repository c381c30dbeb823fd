"""Shared circuit breakers and the agent result cache, across two prefork worker processes."""

from __future__ import annotations

import uuid

from tests.integration.conftest import runs_by_agent, search, use_agents, wait_job

QUERY = "How is wind turbine maintenance scheduled?"


def test_open_breaker_is_seen_by_every_worker_process(stack, collection):
    tag = uuid.uuid4().hex[:8]
    fail_max = 2
    with stack.http() as http:
        use_agents(
            http,
            collection,
            {
                "agent_id": "test_flaky",
                "config": {"fail": True, "log_dir": str(stack.call_logs), "tag": tag},
                "breaker_fail_max": fail_max,
                "breaker_reset_timeout_s": 600,
            },
            # Keeps each job busy a moment so concurrent jobs spread over both worker processes.
            {"agent_id": "test_sleepy", "priority": 10, "config": {"sleep_s": 0.4}},
        )
        for _ in range(fail_max):
            job = search(http, collection, QUERY)
            assert runs_by_agent(job)["test_flaky"]["status"] == "error"
        assert len(stack.calls(f"flaky-{tag}")) == fail_max

        # Batches of concurrent jobs until both worker processes took some (on a loaded machine one process can
        # win every race for a while).
        jobs: list[dict] = []
        for batch in range(5):
            job_ids = [
                http.post("/v1/search", json={"collection_id": collection, "query": f"{QUERY} {batch} {i}"}).json()[
                    "job_id"]
                for i in range(8)
            ]
            jobs += [wait_job(http, job_id) for job_id in job_ids]
            if len({runs_by_agent(job)["test_flaky"]["worker"] for job in jobs}) == 2:
                break

    flaky_runs = [runs_by_agent(job)["test_flaky"] for job in jobs]
    assert all(job["status"] == "succeeded" for job in jobs)
    assert {r["status"] for r in flaky_runs} == {"circuit_open"}
    # Not called again, by any process: the open state lives in Redis.
    assert len(stack.calls(f"flaky-{tag}")) == fail_max
    assert len({r["worker"] for r in flaky_runs}) == 2, "both worker processes should have refused the call"


def test_identical_job_hits_the_agent_cache_and_a_changed_config_misses(stack, collection):
    tag = uuid.uuid4().hex[:8]
    query = f"battery storage capacity {tag}"
    with stack.http() as http:
        use_agents(http, collection,
                   {"agent_id": "test_counting", "config": {"log_dir": str(stack.call_logs), "tag": tag}})
        # use_cache off: the whole-job cache would answer the repeat without running any agent.
        first = runs_by_agent(search(http, collection, query, use_cache=False))["test_counting"]
        second = runs_by_agent(search(http, collection, query, use_cache=False))["test_counting"]
        use_agents(
            http,
            collection,
            {"agent_id": "test_counting", "config": {"log_dir": str(stack.call_logs), "tag": tag + "-changed"}},
        )
        changed = runs_by_agent(search(http, collection, query, use_cache=False))["test_counting"]

    assert (first["status"], first["cache_hit"]) == ("ok", False)
    assert (second["status"], second["cache_hit"]) == ("ok", True)
    assert (changed["status"], changed["cache_hit"]) == ("ok", False)
    assert len(stack.calls(f"counting-{tag}")) == 1
    assert len(stack.calls(f"counting-{tag}-changed")) == 1
