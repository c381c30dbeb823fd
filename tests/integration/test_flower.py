"""`agentsearch flower` against the stack's broker: basic auth enforced, the worker and its tasks visible."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import BIN, REPO, Stack, free_port, start_process, stop_process, wait_for

CREDENTIALS = ("flower-admin", "s3cret-" + uuid.uuid4().hex[:8])


@pytest.fixture(scope="module")
def flower(stack: Stack):
    port = free_port()
    log = stack.tmp / "flower.log"
    env = {**stack.env, "AGENTSEARCH_FLOWER_BASIC_AUTH": ":".join(CREDENTIALS)}
    proc = start_process([str(BIN / "agentsearch"), "flower", "--host", "127.0.0.1", "--port", str(port)], env, log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: httpx.get(f"{url}/healthcheck").status_code == 200, 60, "flower", proc, log)
        yield url, proc, log
    finally:
        stop_process(proc)


def test_flower_refuses_to_start_without_credentials(stack: Stack):
    env = {k: v for k, v in stack.env.items() if k != "AGENTSEARCH_FLOWER_BASIC_AUTH"}
    done = subprocess.run([str(BIN / "agentsearch"), "flower", "--port", str(free_port())], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "AGENTSEARCH_FLOWER_BASIC_AUTH" in done.stderr


def test_flower_demands_the_configured_credentials(flower):
    url, _, _ = flower
    assert httpx.get(f"{url}/api/workers").status_code == 401
    assert httpx.get(f"{url}/api/workers", auth=(CREDENTIALS[0], "wrong")).status_code == 401
    assert httpx.get(f"{url}/workers", auth=("someone", CREDENTIALS[1])).status_code == 401
    assert httpx.get(f"{url}/api/workers", auth=CREDENTIALS).status_code == 200
    assert httpx.get(f"{url}/workers", auth=CREDENTIALS).status_code == 200


def test_the_password_is_not_on_the_command_line(flower):
    _, proc, _ = flower
    cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode(errors="replace")
    assert "flower" in cmdline
    assert CREDENTIALS[1] not in cmdline


def test_flower_lists_the_running_worker_and_its_queues(flower):
    url, proc, log = flower
    found: dict = {}

    def listed() -> bool:
        # refresh: Flower asks the workers (a broadcast over the broker) instead of answering from its cache.
        workers = httpx.get(f"{url}/api/workers", params={"refresh": "1"}, auth=CREDENTIALS, timeout=10).json()
        found.update(workers)
        return any(w.get("active_queues") for w in workers.values())

    wait_for(listed, 30, "the worker in Flower", proc, log)
    (name,) = [n for n, w in found.items() if w.get("active_queues")]  # the stack runs one worker
    assert "@" in name  # Celery's node name: name@host
    assert {q["name"] for q in found[name]["active_queues"]} == {"celery", "artifacts", "ingest"}

    # Liveness from the worker's heartbeat events: the events the workers send are reaching Flower.
    wait_for(lambda: httpx.get(f"{url}/api/workers", params={"status": "1"}, auth=CREDENTIALS).json().get(name),
             30, "the worker's heartbeat events in Flower", proc, log)


def test_flower_sees_tasks_the_api_sends(flower, stack: Stack):
    url, proc, log = flower
    with stack.http() as http:
        created = http.post("/v1/collections", json={"name": f"flower-{uuid.uuid4().hex[:6]}"})
        assert created.status_code == 201, created.text
        accepted = http.post(f"/v1/collections/{created.json()['id']}/documents",
                             json={"documents": [{"id": "d1", "title": "Flower", "text": "A task Flower must see."}]})
        assert accepted.status_code == 202, accepted.text

    def ingest_succeeded() -> bool:
        tasks = httpx.get(f"{url}/api/tasks", auth=CREDENTIALS, timeout=10).json()
        return any(t["name"] == "agentsearch.ingest_documents" and t["state"] == "SUCCESS" for t in tasks.values())

    wait_for(ingest_succeeded, 60, "the ingest task in Flower", proc, log)
