"""/metrics on the API reports what agents did in the worker processes, through the shared Redis."""

from __future__ import annotations

import uuid

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import runs_by_agent, search

AGENTS = ["language_detector", "deduplicator", "executive_summary"]


def scrape(stack) -> tuple[httpx.Response, dict[str, list]]:
    # No Authorization header: scrapers hold no API key.
    response = httpx.get(f"{stack.api_url}/metrics", timeout=30)
    samples: dict[str, list] = {}
    if response.status_code == 200:
        for family in text_string_to_metric_families(response.text):
            for sample in family.samples:
                samples.setdefault(sample.name, []).append(sample)
    return response, samples


def total(samples, name: str, **labels) -> float:
    return sum(s.value for s in samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items()))


def test_metrics_count_the_agents_of_a_job_without_credentials(stack, collection):
    _, before = scrape(stack)
    with stack.http() as http:
        job = search(http, collection, f"solar output in 2025 {uuid.uuid4().hex[:8]}", agents=AGENTS, use_cache=False)
    assert job["status"] == "succeeded", job["error"]
    runs = runs_by_agent(job)

    response, after = scrape(stack)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert total(after, "agentsearch_metrics_store_up") == 1
    for agent in AGENTS:
        # The job's one run of each agent, whichever worker process ran it, whatever its status.
        ran = (total(after, "agentsearch_agent_runs_total", agent=agent)
               - total(before, "agentsearch_agent_runs_total", agent=agent))
        assert ran == 1, agent
        status = "cached" if runs[agent]["cache_hit"] else runs[agent]["status"]
        assert total(after, "agentsearch_agent_runs_total", agent=agent, status=status) >= 1, agent
        assert total(after, "agentsearch_agent_duration_seconds_count", agent=agent) > 0, agent
        breakers = [s for s in after["agentsearch_breaker_state"] if s.labels["agent"] == agent]
        assert breakers and all(s.value == 0 for s in breakers), agent  # closed
    assert total(after, "agentsearch_artifact_size_bytes_count", agent="executive_summary") > 0
    assert total(after, "agentsearch_cache_hits_total", cache="search") + total(
        after, "agentsearch_cache_misses_total", cache="search"
    ) > total(before, "agentsearch_cache_hits_total", cache="search") + total(
        before, "agentsearch_cache_misses_total", cache="search"
    )
    # The job's answer, written offline (this stack's workers have no LLM), counted for its collection.
    answered = (total(after, "agentsearch_answers_total", collection=collection, method="offline")
                - total(before, "agentsearch_answers_total", collection=collection, method="offline"))
    assert answered == 1
    queues = {s.labels["queue"]: s.value for s in after["agentsearch_queue_length"]}
    assert set(queues) == {"celery", "artifacts", "ingest", "webhooks"}
    assert all(v >= 0 for v in queues.values())
