"""A real distributed stack for the integration tests (``devstack``).

PostgreSQL (a fresh database), a Redis server of the suite's own, ``milvus-lite server`` on a free port, a prefork
Celery worker subprocess with two processes, and the API as its own subprocess: the same processes a deployment
runs, on this machine.
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from agentsearch.devstack import BIN, REPO, DevStack, free_port, start_process, stop_process, wait_for  # shared
from agentsearch.devstack.llm_server import LLMServer

SAMPLE_CORPUS = REPO / "src" / "agentsearch" / "examples" / "sample_corpus.jsonl"
# How long the stack's searches and ingests wait for Milvus (1 + 2 + 4 + 3 s of backoff); the default is 60 s.
MILVUS_RETRY_S = 10
# The work of one parsing task of a long file (src/agentsearch/worker/parsing.py); the default is 10 s.
PARSE_WINDOW_S = 2
# The answer's LLM budget on the stacks with a real model (the default is 60 s; the job deadline is 600).
LLM_ANSWER_BUDGET_S = 120  # within the 180 s these tests wait for a job

pytestmark = pytest.mark.integration


class Stack(DevStack):
    """The suite's stack: test agents loaded in the workers, which log their calls under ``call_logs``."""

    def __init__(self, tmp: Path, llm=None) -> None:
        self.tmp = tmp
        self.call_logs = tmp / "calls"
        self.call_logs.mkdir(parents=True, exist_ok=True)
        # Not the webhooks queue: test_webhooks sends its deliveries with a worker of its own, the one allowed to
        # reach its receiver on 127.0.0.1 (this stack keeps the egress guard's defaults, which test_trust_* hold).
        super().__init__(tmp, workers=1, concurrency=2, user="it-user", queues="celery,artifacts,ingest",
                         extra_env={"AGENTSEARCH_AGENT_MODULES": json.dumps(["tests.support.faulty_agents"]),
                                    # test_faults: a Milvus outage outlasts this in seconds, not a minute.
                                    "AGENTSEARCH_MILVUS_RETRY_S": str(MILVUS_RETRY_S),
                                    # test_parse_fairness: a scan of a few pages is read in several windows.
                                    "AGENTSEARCH_PARSE_WINDOW_S": str(PARSE_WINDOW_S),
                                    # The suite's modules share this stack's user, in an order the test
                                    # processes pick. test_exploding always fails, so its circuit would open for
                                    # whichever module runs it sixth; tests of circuits set their own fail_max.
                                    "AGENTSEARCH_BREAKER_FAIL_MAX": "1000",
                                    # The tests of a real model's answer read what it wrote: on two busy cores the
                                    # small model's reply to a long prompt can pass the 60 s default, and the job
                                    # would then deliver the offline answer they are not about.
                                    **({"AGENTSEARCH_ANSWER_LLM_TIMEOUT_S": str(LLM_ANSWER_BUDGET_S)} if llm else {})},
                         llm=llm)

    def calls(self, name: str) -> list[int]:
        path = self.call_logs / f"{name}.calls"
        return [int(line) for line in path.read_text().split()] if path.exists() else []


@pytest.fixture(scope="session")
def stack(tmp_path_factory) -> Stack:
    with Stack(tmp_path_factory.mktemp("stack")) as running:
        yield running


@pytest.fixture(scope="session")
def llm_server(tmp_path_factory) -> Iterator[LLMServer]:
    """A real OpenAI-compatible LLM server (llama-server with SmolLM2-135M-Instruct), built once per machine."""
    with LLMServer(tmp_path_factory.mktemp("llm-server")) as running:
        yield running


@pytest.fixture(scope="session")
def llm_stack(tmp_path_factory, llm_server: LLMServer) -> Stack:
    """A second stack like the suite's, whose workers answer (and run their LLM agents) with ``llm_server``."""
    with Stack(tmp_path_factory.mktemp("llm-stack"), llm=llm_server) as running:
        yield running


@pytest.fixture(scope="session")
def collection(stack: Stack) -> str:
    """The sample corpus, ingested through the API and indexed by the worker."""
    documents = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
    with stack.http() as http:
        created = http.post("/v1/collections", json={"name": "it-corpus"})
        assert created.status_code == 201, created.text
        collection_id = created.json()["id"]
        accepted = http.post(f"/v1/collections/{collection_id}/documents", json={"documents": documents})
        assert accepted.status_code == 202, accepted.text
        deadline = time.monotonic() + 120
        while True:
            counts = http.get(f"/v1/collections/{collection_id}").json()["documents"]
            if counts["pending"] == 0:
                break
            assert time.monotonic() < deadline, f"indexing stuck: {counts}"
            time.sleep(0.3)
        assert counts == {"pending": 0, "indexed": len(documents), "failed": 0}
        # Warm both worker processes (model preload) so timing assertions measure the pipeline, not start-up.
        jobs = [http.post("/v1/search", json={"collection_id": collection_id, "query": "solar", "agents": [],
                                              "use_cache": False}).json()["job_id"]
                for _ in range(4)]
        for job_id in jobs:
            wait_job(http, job_id)
    return collection_id


def own_collection(http: httpx.Client, name: str, documents: list[dict] | None = None,
                   timeout_s: float = 60) -> str:
    """A new collection of the caller's, with ``documents`` indexed (waited for) when given."""
    created = http.post("/v1/collections", json={"name": name})
    assert created.status_code == 201, created.text
    collection_id = created.json()["id"]
    if documents:
        assert http.post(f"/v1/collections/{collection_id}/documents",
                         json={"documents": documents}).status_code == 202
        wait_indexed(http, collection_id, timeout_s)
    return collection_id


def wait_indexed(http: httpx.Client, collection_id: str, timeout_s: float = 60) -> None:
    """Until the collection has no document pending."""
    deadline = time.monotonic() + timeout_s
    while http.get(f"/v1/collections/{collection_id}").json()["documents"]["pending"]:
        assert time.monotonic() < deadline, "indexing stuck"
        time.sleep(0.2)


def wait_job(http: httpx.Client, job_id: str, timeout_s: float = 90) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        job = http.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return job
        assert time.monotonic() < deadline, f"job {job_id} stuck in {job['status']} at {job['stage']}"
        time.sleep(0.1)


def sleepy_job(http: httpx.Client, collection_id: str, query: str) -> str:
    """A job of the collection's agents (its first one ``test_sleepy``), returned once the sleepy step runs."""
    job_id = http.post("/v1/search", json={"collection_id": collection_id, "query": query, "use_cache": False}
                       ).json()["job_id"]
    deadline = time.monotonic() + 60
    while http.get(f"/v1/jobs/{job_id}").json()["stage"] != "pre_search:test_sleepy":
        assert time.monotonic() < deadline, "the sleepy step never started"
        time.sleep(0.05)
    return job_id


def use_agents(http: httpx.Client, collection_id: str, *configs: dict) -> list[dict]:
    """Create agent configs and make them the collection's whole agent set."""
    created = []
    for body in configs:
        response = http.post("/v1/agent-configs", json=body)
        assert response.status_code == 201, response.text
        created.append(response.json())
    response = http.put(
        f"/v1/collections/{collection_id}/agents", json={"agents": [{"agent_config_id": c["id"]} for c in created]}
    )
    assert response.status_code == 200, response.text
    return created


def search(http: httpx.Client, collection_id: str, query: str, timeout_s: float = 90, **extra) -> dict:
    response = http.post("/v1/search", json={"collection_id": collection_id, "query": query, **extra})
    assert response.status_code == 202, response.text
    return wait_job(http, response.json()["job_id"], timeout_s)


def runs_by_agent(job: dict) -> dict[str, dict]:
    return {r["agent_id"]: r for r in job["response"]["agents"]}


@contextmanager
def extra_api(env: dict[str, str], log: Path) -> Iterator[str]:
    """One more API process on ``env`` (the stack's environment with a few settings of a test's own): its URL for as
    long as the block lasts."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_process([str(BIN / "agentsearch"), "api", "--host", "127.0.0.1", "--port", str(port)], env, log)
    try:
        wait_for(lambda: httpx.get(f"{url}/healthz").status_code == 200, 90, "api", proc, log)
        yield url
    finally:
        stop_process(proc)


@contextmanager
def extra_api_and_worker(workdir: Path, env: dict[str, str], queues: str, concurrency: int, name: str):
    """One more API and a thread-pool worker on ``env`` (the suite's stack with a few settings of a test's own),
    running while the block lasts; yields the API's URL. ``env`` gets that URL as ``AGENTSEARCH_API_URL``."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env["AGENTSEARCH_API_URL"] = url
    api_log, worker_log = workdir / "api.log", workdir / "worker.log"
    worker = start_process([str(BIN / "agentsearch"), "worker", "--pool", "threads", "--concurrency", str(concurrency),
                            "--queues", queues, "--loglevel", "INFO",
                            "--hostname", f"{name}-{uuid.uuid4().hex[:4]}@{socket.gethostname()}"], env, worker_log)
    api = start_process([str(BIN / "agentsearch"), "api", "--host", "127.0.0.1", "--port", str(port)], env, api_log)
    try:
        wait_for(lambda: httpx.get(f"{url}/readyz").status_code == 200, 60, "api", api, api_log)
        wait_for(lambda: "ready." in worker_log.read_text(), 90, f"{name} worker", worker, worker_log)
        yield url
    finally:
        stop_process(api)
        stop_process(worker)
