"""One search job through the real stack: HTTP -> Postgres job row -> Celery chain and chord -> Milvus -> answer."""

from __future__ import annotations

import base64
import re

from tests.integration.conftest import runs_by_agent, search, use_agents
from tests.support.readers import HtmlReader

QUERY = "What was Northwind Energy's revenue in Q4 2025?"


def test_job_with_agents_in_every_stage(stack, collection):
    with stack.http() as http:
        configs = use_agents(
            http,
            collection,
            # Given out of order on purpose: the chain must follow priority, lower first.
            {"agent_id": "acronym_resolver", "priority": 10, "config": {"acronyms": {"Q4": "fourth quarter"}}},
            {"agent_id": "language_detector", "priority": 0},
            {"agent_id": "deduplicator", "config": {"threshold": 0.5}},
            {"agent_id": "executive_summary", "config": {"max_words": 80}},
            {"agent_id": "email_draft", "priority": 10},
        )
        job = search(http, collection, QUERY, cot=True)
        assert job["status"] == "succeeded", job["error"]
        response = job["response"]

        runs = response["agents"]
        assert [(r["stage"], r["agent_id"]) for r in runs] == [
            ("pre_search", "language_detector"),
            ("pre_search", "acronym_resolver"),
            ("post_search", "deduplicator"),
            ("response", "executive_summary"),
            ("response", "email_draft"),
        ]
        assert all(r["status"] == "ok" for r in runs), runs
        # The acronym resolver saw the query after the detector and changed what was searched.
        assert response["search_query"] == "What was Northwind Energy's revenue in Q4 (fourth quarter) 2025?"
        assert response["metadata"]["language"] == "en"

        assert response["sources"], "the search found nothing"
        assert "nw-2025-q4" in [s["document_id"] for s in response["sources"]]
        cited = {int(n) for n in re.findall(r"\[(\d+)\]", response["answer"])}
        assert cited and cited <= set(range(1, len(response["sources"]) + 1))
        assert "$412 million" in response["answer"]
        assert response["cot_steps"] and response["cot_steps"][0]["step"] == 1

        artifacts = {a["agent_id"]: a for a in response["agent_artifacts"]}
        assert set(artifacts) == {"executive_summary", "email_draft"}
        summary = base64.b64decode(artifacts["executive_summary"]["data"]).decode()
        assert QUERY in summary and len(summary.split()) <= 80
        parser = HtmlReader()
        parser.feed(base64.b64decode(artifacts["email_draft"]["data"]).decode())
        assert "script" not in parser.tags and "li" in parser.tags
        assert "$412 million" in "".join(parser.text)

        download = http.get(artifacts["email_draft"]["url"])
        assert download.status_code == 200
        assert download.headers["content-type"].startswith("text/html")
        assert download.content == base64.b64decode(artifacts["email_draft"]["data"])
        assert http.get(f"/v1/jobs/{job['job_id']}/artifacts/nothing.pdf").status_code == 404

    # The jobs row is the truth: status, the configs the job ran with, per-agent timings.
    (status, stage, snapshot, agent_runs, timings, started, finished), = stack.sql(
        "SELECT status, stage, config_snapshot, agent_runs, timings_ms, started_at, finished_at "
        "FROM jobs WHERE id = %s",
        job["job_id"],
    )
    assert status == "succeeded" and stage == "done" and started <= finished
    assert sorted(s["config_id"] for s in snapshot) == sorted(c["id"] for c in configs)
    assert {s["agent_id"]: s["config"] for s in snapshot}["acronym_resolver"] == {
        "acronyms": {"Q4": "fourth quarter"},
        "case_sensitive": True,
        "use_mined": True,
    }
    assert len(agent_runs) == 5 and all(r["duration_ms"] > 0 and r["worker"] for r in agent_runs)
    assert {"pre_search", "core_search", "post_search", "answer"} <= set(timings)


def test_agent_that_raises_is_recorded_and_the_job_succeeds(stack, collection):
    with stack.http() as http:
        job = search(http, collection, QUERY, agents=["test_exploding", "language_detector", "executive_summary"])
    assert job["status"] == "succeeded", job["error"]
    runs = runs_by_agent(job)
    assert runs["test_exploding"]["status"] == "error"
    assert "boom: the exploding agent exploded" in runs["test_exploding"]["errors"][0]
    assert runs["language_detector"]["status"] == "ok"
    assert job["response"]["answer"] and job["response"]["agent_artifacts"]
    skipped = job["response"]["skipped"][0]
    assert {"agent_id": "test_exploding", "stage": "pre_search", "status": "error"}.items() <= skipped.items()


def test_agent_past_its_deadline_is_cut_off(stack, collection):
    timeout_s = 1.0

    def elapsed_s(job: dict) -> float:
        (seconds,), = stack.sql(
            "SELECT EXTRACT(EPOCH FROM finished_at - created_at) FROM jobs WHERE id = %s", job["job_id"]
        )
        return float(seconds)

    with stack.http() as http:
        # The same job without the hung agent, just before: what the rest of the job costs on this machine now.
        use_agents(http, collection, {"agent_id": "test_sleepy", "config": {"sleep_s": 0}, "timeout_s": timeout_s})
        baseline = search(http, collection, QUERY, use_cache=False)
        use_agents(http, collection, {"agent_id": "test_sleepy", "config": {"sleep_s": 60}, "timeout_s": timeout_s})
        job = search(http, collection, QUERY, use_cache=False)
    assert job["status"] == "succeeded", job["error"]
    run = runs_by_agent(job)["test_sleepy"]
    assert run["status"] == "timeout" and "1 s deadline" in run["errors"][0]
    # The hung agent costs the job its deadline, not the 60 s it would sleep (half of that is room for a loaded
    # machine).
    assert timeout_s <= run["duration_ms"] / 1000 < 30
    assert elapsed_s(job) - elapsed_s(baseline) < 30, (elapsed_s(job), elapsed_s(baseline))


def test_response_agent_that_raises_does_not_stop_the_chord(stack, collection):
    with stack.http() as http:
        job = search(http, collection, QUERY, agents=["test_exploding_responder", "executive_summary", "email_draft"])
    assert job["status"] == "succeeded", job["error"]
    runs = runs_by_agent(job)
    assert runs["test_exploding_responder"]["status"] == "error"
    assert "renderer crashed" in runs["test_exploding_responder"]["errors"][0]
    assert sorted(a["agent_id"] for a in job["response"]["agent_artifacts"]) == ["email_draft", "executive_summary"]
