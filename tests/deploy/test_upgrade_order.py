"""The upgrade drill's roll (src/agentsearch/devstack/upgrade_drill.py) against a fake compose stack and API: the
order docs/operations.md gives (migrate on the current image, then the workers, beat, the API), jobs submitted
around every stage, and a lost job refused. No Docker daemon: the drill's run on a real one is `make deploy-drill`."""

from __future__ import annotations

import itertools
import re

import httpx
import pytest

from agentsearch.devstack import upgrade_drill
from agentsearch.devstack.drill_stack import Drill


class FakeStack:
    """What the drill asks compose, docker and the API, answered from a record of which image each service runs."""

    def __init__(self, release: str, lose_a_job: bool = False) -> None:
        self.images = dict.fromkeys((*upgrade_drill.APP_SERVICES, "migrate"), release)
        self.ids = itertools.count()
        self.containers = {s: f"{next(self.ids):012x}" + "0" * 52 for s in self.images}
        self.calls: list[tuple[str, ...]] = []
        self.jobs: dict[str, str] = {}
        self.lose_a_job = lose_a_job

    def compose(self, drill: Drill, *args: str, timeout_s: float = 600) -> str:
        self.calls.append(args)
        tag = drill.env["AGENTSEARCH_TAG"]
        if args[0] == "up" and "--no-deps" in args:
            for service in args[args.index("--no-deps") + 1:]:
                self.images[service] = tag
                self.containers[service] = f"{next(self.ids):012x}" + "0" * 52
        if args[0] == "run":
            self.images["migrate"] = tag
        if args[0] == "ps":
            return self.containers[args[-1]]
        if args[:2] == ("exec", "-T") and "psql" in args:
            return "0021_eval_sets" if self.images["migrate"] != "77f5e0a" else "0011_document_files"
        return "created user upgrade-user; its API key follows\nkey-123\n"

    def docker(self, *args: str, **_) -> object:
        container = args[-1]
        service = next(s for s, c in self.containers.items() if c == container)
        return type("Done", (), {"stdout": f"agentsearch:{self.images[service]}", "stderr": ""})()

    def api(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/v1/collections":
            return httpx.Response(201, json={"id": "c1"})
        if path.endswith("/documents"):
            return httpx.Response(202, json={"accepted": 2})
        if path == "/v1/collections/c1":
            return httpx.Response(200, json={"documents": {"indexed": 2}})
        if path == "/v1/search":
            job_id = f"job-{len(self.jobs)}"
            # Each job's agents run on the workers of the moment and, once rolled, on the current ones.
            self.jobs[job_id] = self.containers["worker-threads"][:12]
            return httpx.Response(202, json={"job_id": job_id})
        job_id = re.fullmatch(r"/v1/jobs/(.+)", path).group(1)  # type: ignore[union-attr]
        status = "failed" if self.lose_a_job and job_id == "job-5" else "succeeded"
        runs = [{"worker": f"{self.jobs[job_id]}:7"}, {"worker": f"{self.containers['worker-threads'][:12]}:9"}]
        return httpx.Response(200, json={"status": status, "agents": runs})


@pytest.fixture
def fake(monkeypatch, tmp_path):
    def run(lose_a_job: bool = False) -> tuple[FakeStack, Drill]:
        stack = FakeStack("77f5e0a", lose_a_job)
        drill = Drill(tmp_path, "77f5e0a", upgrade_drill.UPGRADE_PROJECT)
        monkeypatch.setattr(drill, "compose", lambda *a, **k: stack.compose(drill, *a, **k))
        monkeypatch.setattr(drill, "wait_healthy", lambda *a: None)
        monkeypatch.setattr(drill, "http", lambda: httpx.Client(base_url="http://api", transport=httpx.MockTransport(
            stack.api)))
        monkeypatch.setattr(upgrade_drill, "docker", stack.docker)
        monkeypatch.setattr(upgrade_drill, "ready", lambda api: True)
        monkeypatch.setattr(upgrade_drill, "container_cpu_s", lambda container: 2.0)
        return stack, drill
    return run


def test_the_stack_rolls_in_the_documented_order_with_every_job_accounted_for(fake):
    stack, drill = fake()
    figures = upgrade_drill.roll_with_jobs(drill, "c1", "0.1.0")
    rolled = [c for c in stack.calls if c[0] == "run" or (c[0] == "up" and "--no-deps" in c)]
    assert [c[c.index("--no-deps") + 1:] if c[0] == "up" else ("migrate",) for c in rolled] == [
        ("migrate",), upgrade_drill.WORKERS, ("beat",), ("api",), ("flower",)]
    assert set(stack.images.values()) == {"0.1.0"}
    assert figures["jobs"] == 4 * upgrade_drill.JOBS_PER_BATCH == figures["succeeded"]
    # The jobs submitted before the workers rolled ran on both releases' workers.
    assert figures["jobs_across_the_roll"] == 2 * upgrade_drill.JOBS_PER_BATCH
    assert list(drill.figures["steps"]) == [
        "upgrade: jobs on the previous release", "upgrade: migrate with the current image",
        "upgrade: roll the workers", "upgrade: jobs on the current workers, the previous API", "upgrade: roll beat",
        "upgrade: roll the API", "upgrade: roll Flower", "upgrade: jobs through the current API",
        "upgrade: every job ended"]
    assert drill.figures["schema_after"] == "0021_eval_sets"


def test_a_job_that_did_not_succeed_fails_the_drill(fake):
    _stack, drill = fake(lose_a_job=True)
    with pytest.raises(RuntimeError, match="'failed': 1"):
        upgrade_drill.roll_with_jobs(drill, "c1", "0.1.0")
