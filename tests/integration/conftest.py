"""A real distributed stack for the integration tests.

PostgreSQL (a fresh database), Redis (dedicated db numbers), ``milvus-lite server`` on a free port, a prefork
Celery worker subprocess with two processes, and the API as its own subprocess: the same processes a deployment
runs, on this machine.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
import redis

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PG_ADMIN = os.environ.get("AGENTSEARCH_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
BROKER_DB, RESULTS_DB, CACHE_DB = 0, 1, 2
SAMPLE_CORPUS = REPO / "examples" / "sample_corpus.jsonl"

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate, timeout_s: float, what: str, proc: subprocess.Popen | None = None, log: Path | None = None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-3000:] if log and log.exists() else ""
            raise RuntimeError(f"{what}: process exited with {proc.returncode}\n{tail}")
        try:
            if predicate():
                return
        except Exception:  # noqa: BLE001 - not up yet
            pass
        time.sleep(0.2)
    tail = log.read_text()[-3000:] if log and log.exists() else ""
    raise TimeoutError(f"{what} not ready after {timeout_s} s\n{tail}")


@dataclass
class Stack:
    api_url: str
    env: dict[str, str]
    database_url: str
    redis_url: str
    tmp: Path
    call_logs: Path
    logs: dict[str, Path]

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.api_url, timeout=30)

    def sql(self, query: str, *params):
        with psycopg.connect(self.database_url.replace("+psycopg", "")) as conn:
            return conn.execute(query, params).fetchall()

    def calls(self, name: str) -> list[int]:
        path = self.call_logs / f"{name}.calls"
        return [int(line) for line in path.read_text().split()] if path.exists() else []


def _start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True
    )


def _stop(proc: subprocess.Popen, timeout_s: float = 15) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


@pytest.fixture(scope="session")
def stack(tmp_path_factory) -> Stack:
    tmp = tmp_path_factory.mktemp("stack")
    call_logs = tmp / "calls"
    call_logs.mkdir()
    db_name = f"agentsearch_it_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db_name}"')
    database_url = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + f"/{db_name}"
    milvus_port, api_port, redis_port = free_port(), free_port(), free_port()
    # A Redis server of the suite's own: two runs on one machine must not share a broker (their workers would
    # take each other's tasks). The machine's Redis package provides the binary.
    REDIS_BASE = f"redis://127.0.0.1:{redis_port}"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "AGENTSEARCH_DATA_DIR": str(tmp / "data"),
        "AGENTSEARCH_DATABASE_URL": database_url,
        "AGENTSEARCH_BROKER_URL": f"{REDIS_BASE}/{BROKER_DB}",
        "AGENTSEARCH_RESULT_BACKEND": f"{REDIS_BASE}/{RESULTS_DB}",
        "AGENTSEARCH_REDIS_URL": f"{REDIS_BASE}/{CACHE_DB}",
        "AGENTSEARCH_MILVUS_URI": f"http://127.0.0.1:{milvus_port}",
        "AGENTSEARCH_AGENT_MODULES": json.dumps(["tests.support.faulty_agents"]),
        "AGENTSEARCH_API_URL": f"http://127.0.0.1:{api_port}",
    }
    logs = {name: tmp / f"{name}.log" for name in ("redis", "milvus", "worker", "api")}
    procs: list[subprocess.Popen] = []
    try:
        redis_server = _start(
            ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--maxmemory-policy", "noeviction"],
            env,
            logs["redis"],
        )
        procs.append(redis_server)
        wait_for(lambda: redis.Redis.from_url(REDIS_BASE).ping(), 20, "redis", redis_server, logs["redis"])
        milvus = _start(
            [str(BIN / "milvus-lite"), "server", "--data-dir", str(tmp / "milvus"), "--host", "127.0.0.1",
             "--port", str(milvus_port)],
            env,
            logs["milvus"],
        )
        procs.append(milvus)
        wait_for(lambda: socket.create_connection(("127.0.0.1", milvus_port), 1).close() or True, 60,
                 "milvus-lite server", milvus, logs["milvus"])
        subprocess.run([str(BIN / "agentsearch"), "migrate"], cwd=REPO, env=env, check=True, capture_output=True)
        worker = _start(
            [str(BIN / "agentsearch"), "worker", "--concurrency", "2", "--queues", "celery,artifacts",
             "--loglevel", "INFO"],
            env,
            logs["worker"],
        )
        procs.append(worker)
        api = _start([str(BIN / "agentsearch"), "api", "--host", "127.0.0.1", "--port", str(api_port)], env, logs["api"])
        procs.append(api)
        api_url = f"http://127.0.0.1:{api_port}"
        wait_for(lambda: httpx.get(f"{api_url}/readyz").status_code == 200, 60, "api", api, logs["api"])
        wait_for(lambda: "ready." in logs["worker"].read_text(), 60, "worker", worker, logs["worker"])
        yield Stack(api_url, env, database_url, f"{REDIS_BASE}/{CACHE_DB}", tmp, call_logs, logs)
    finally:
        for proc in reversed(procs):
            _stop(proc)
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')


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


def wait_job(http: httpx.Client, job_id: str, timeout_s: float = 90) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        job = http.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed", "cancelled"):
            return job
        assert time.monotonic() < deadline, f"job {job_id} stuck in {job['status']} at {job['stage']}"
        time.sleep(0.1)


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


def search(http: httpx.Client, collection_id: str, query: str, **extra) -> dict:
    response = http.post("/v1/search", json={"collection_id": collection_id, "query": query, **extra})
    assert response.status_code == 202, response.text
    return wait_job(http, response.json()["job_id"])


def runs_by_agent(job: dict) -> dict[str, dict]:
    return {r["agent_id"]: r for r in job["response"]["agents"]}
