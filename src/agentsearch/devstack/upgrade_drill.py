"""The deploy drill's upgrade: a compose stack of the previous release rolled to the current image with jobs in
flight, in the order docs/operations.md gives ("Upgrades"): migrate, the workers, beat, then the API. No job may be
lost: every one submitted, before, during and after the roll, must succeed.

Usage::

    figures = run_upgrade(workdir, release="77f5e0a", current="0.1.0")   # both images built (release_image.py)

A stack of its own (compose project ``agentsearch-upgrade``, new volumes) starts on the release's image, its schema
made by the release's ``migrate``. Jobs go in through the stack's API port in four batches: before the roll; just
before the workers roll, so that steps are running when compose stops the release's workers (SIGTERM: their soft
shutdown hands the running steps back to the queue, and the current workers take them); between the workers' roll
and the API's (the release's API, the current workers); after the API's (the current one). Compose replaces a
container by creating the new one, stopping the old one, then starting the new one: "all at once" in
docs/operations.md's words, the queue holding the steps in between.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import httpx

from agentsearch.devstack.docker_host import container_cpu_s, docker
from agentsearch.devstack.drill_documents import MINUTES, REPORT
from agentsearch.devstack.drill_stack import STACK_SERVICES, STARTUP_TIMEOUT_S, Drill, job_status, ready

UPGRADE_PROJECT = "agentsearch-upgrade"
WORKERS = ("worker-threads", "worker-prefork", "worker-webhooks")
APP_SERVICES = (*STACK_SERVICES, "api")
JOBS_PER_BATCH = 12
# Pre-search, post-search and a response agent that need no LLM server, no espeak-ng and no Tesseract: the release's
# image has neither of the last two (deploy/previous-release/Dockerfile).
AGENTS = ["language_detector", "deduplicator", "executive_summary"]
QUERY = "What was Northwind Energy's revenue in 2024?"
# JSON documents: the one way of adding documents both releases' APIs have in common.
DOCUMENTS = [{"id": "annual-report-2024", "title": "Annual report 2024", "text": REPORT},
             {"id": "board-minutes-2025-03", "title": "Board minutes, March 2025", "text": MINUTES}]
TERMINAL = {"succeeded", "failed", "cancelled"}
UNREGISTERED = "Received unregistered task"


def schema_head(drill: Drill) -> str:
    """The Alembic revision the stack's database is at, read by psql in the PostgreSQL container."""
    return drill.compose("exec", "-T", "-e", "PGPASSWORD=agentsearch", "postgres", "psql", "-h", "127.0.0.1",
                         "-U", "agentsearch", "-d", "agentsearch", "-tAc",
                         "SELECT version_num FROM alembic_version").strip()


def service_images(drill: Drill, services: tuple[str, ...] = APP_SERVICES) -> dict[str, list[str]]:
    """Each service's running containers' images (``agentsearch:<tag>``)."""
    return {service: [docker("inspect", "--format", "{{.Config.Image}}", c).stdout.strip()
                      for c in drill.containers(service)] for service in services}


def submit(http: httpx.Client, collection: str, batch: str) -> list[str]:
    bodies = [{"collection_id": collection, "query": f"{QUERY} ({batch} {i})", "agents": AGENTS, "use_cache": False}
              for i in range(JOBS_PER_BATCH)]
    return [http.post("/v1/search", json=body).raise_for_status().json()["job_id"] for body in bodies]


def unfinished(http: httpx.Client, job_ids: list[str]) -> int:
    return sum(job_status(http, j) not in TERMINAL for j in job_ids)


def worker_hosts(drill: Drill) -> set[str]:
    """The workers' host names: a container's is its id's first 12 characters."""
    return {c[:12] for service in WORKERS for c in drill.containers(service)}


def ran_on_both(job: dict, release_hosts: set[str]) -> bool:
    """Whether the job's agents ran on a worker of the release and on a current one (each agent run names its
    worker ``host:pid``, src/agentsearch/pipeline/agents/runner.py)."""
    hosts = {run["worker"].rsplit(":", 1)[0] for run in job.get("agents") or [] if run.get("worker")}
    return bool(hosts & release_hosts) and bool(hosts - release_hosts)


def roll(drill: Drill, services: tuple[str, ...], healthy: bool = True) -> None:
    """The services' containers replaced by the image of ``drill.env["AGENTSEARCH_TAG"]``, each waited healthy."""
    drill.compose("up", "-d", "--no-build", "--no-deps", *services, timeout_s=900)
    for service in services if healthy else ():
        drill.wait_healthy(service, 1, STARTUP_TIMEOUT_S)


def check_images(drill: Drill, tag: str, services: tuple[str, ...]) -> None:
    wrong = {s: images for s, images in service_images(drill, services).items() if images != [f"agentsearch:{tag}"]}
    if wrong:
        raise RuntimeError(f"not on agentsearch:{tag}: {wrong}")


def run_upgrade(workdir: Path, release: str, current: str) -> dict:
    """The upgrade's steps on a stack of their own, torn down at the end; their figures (``steps`` and the job
    counts). Raises at the first step that fails, a lost or failed job included."""
    drill = Drill(workdir, release, UPGRADE_PROJECT)
    try:
        with drill.step("upgrade: stack up on the previous release") as found:
            drill.compose("up", "-d", "--no-build", *APP_SERVICES, timeout_s=900)
            for service in STACK_SERVICES:
                drill.wait_healthy(service, 1, STARTUP_TIMEOUT_S)
            drill.wait("the release's API /readyz", lambda: ready(drill.api), STARTUP_TIMEOUT_S)
            check_images(drill, release, APP_SERVICES)
            drill.figures["schema_before"] = found["schema"] = schema_head(drill)
        with drill.step("upgrade: a user and documents on the previous release") as found:
            drill.key = drill.compose("exec", "-T", "api", "agentsearch", "users", "create",
                                      "upgrade-user").strip().splitlines()[-1]
            drill.compose("exec", "-T", "api", "agentsearch", "users", "limits", "upgrade-user",
                          "--searches-per-minute", "1000", "--max-running-jobs", "100")
            with drill.http() as http:
                collection = http.post("/v1/collections", json={"name": "upgrade"}).raise_for_status().json()["id"]
                http.post(f"/v1/collections/{collection}/documents",
                          json={"documents": DOCUMENTS}).raise_for_status()

                def indexed() -> bool:
                    counts = http.get(f"/v1/collections/{collection}").json()["documents"]
                    if counts.get("failed"):
                        raise RuntimeError(f"a document failed on the release: {counts}")
                    return counts.get("indexed", 0) == len(DOCUMENTS)

                drill.wait("documents indexed", indexed, 300)
            found["documents"] = len(DOCUMENTS)
        figures = roll_with_jobs(drill, collection, current)
    finally:
        (workdir / "upgrade-compose.log").write_text(drill.compose("logs", "--no-color", "--timestamps"))
        with drill.step("upgrade: tear down"):
            drill.compose("down", "--volumes", "--remove-orphans", "--timeout", "30")
    return {**drill.figures, **figures}


def roll_with_jobs(drill: Drill, collection: str, current: str) -> dict:
    """The roll itself, in the documented order, with the four batches of jobs; every job must succeed."""
    jobs: list[str] = []
    with drill.http() as http:
        with drill.step("upgrade: jobs on the previous release") as found:
            jobs += submit(http, collection, "before")
            found["jobs"] = JOBS_PER_BATCH
        with drill.step("upgrade: migrate with the current image") as found:
            drill.env["AGENTSEARCH_TAG"] = current
            drill.compose("run", "--rm", "--no-deps", "-T", "migrate", timeout_s=900)
            drill.figures["schema_after"] = found["schema"] = schema_head(drill)
            found["unfinished_jobs"] = unfinished(http, jobs)
        with drill.step("upgrade: roll the workers") as found:
            jobs += submit(http, collection, "workers")
            # Counted as compose stops the release's workers: these jobs' steps are what their soft shutdown hands
            # back to the queue.
            found["unfinished_jobs"] = unfinished(http, jobs)
            release_hosts = worker_hosts(drill)
            roll(drill, WORKERS)
        with drill.step("upgrade: jobs on the current workers, the previous API") as found:
            jobs += submit(http, collection, "between")
            found["jobs"] = JOBS_PER_BATCH
        with drill.step("upgrade: roll beat") as found:
            roll(drill, ("beat",))
        with drill.step("upgrade: roll the API") as found:
            found["unfinished_jobs"] = unfinished(http, jobs)
            started = time.monotonic()
            roll(drill, ("api",), healthy=False)
            drill.wait("the current API /readyz", lambda: ready(drill.api), STARTUP_TIMEOUT_S, every_s=0.1)
            found["ready_s"] = round(time.monotonic() - started, 2)
            found["api_cpu_s"] = container_cpu_s(drill.containers("api")[0])
        with drill.step("upgrade: roll Flower") as found:
            roll(drill, ("flower",))
        with drill.step("upgrade: jobs through the current API") as found:
            jobs += submit(http, collection, "after")
            found["jobs"] = JOBS_PER_BATCH
        with drill.step("upgrade: every job ended") as found:
            statuses: Counter = Counter()

            def all_ended() -> bool:
                statuses.clear()
                statuses.update(job_status(http, j) for j in jobs)
                return not statuses.keys() - TERMINAL

            drill.wait("jobs ended after the upgrade", all_ended, STARTUP_TIMEOUT_S, every_s=2)
            check_images(drill, current, APP_SERVICES)
            unregistered = sum(UNREGISTERED in (logs := docker("logs", c)).stdout + logs.stderr
                               for service in WORKERS for c in drill.containers(service))
            crossed = sum(ran_on_both(http.get(f"/v1/jobs/{j}").json(), release_hosts) for j in jobs)
            found.update(jobs=len(jobs), succeeded=statuses["succeeded"], jobs_across_the_roll=crossed,
                         workers_with_unregistered=unregistered)
    if statuses["succeeded"] != len(jobs) or unregistered:
        raise RuntimeError(f"jobs across the upgrade: {dict(statuses)} of {len(jobs)}; "
                           f"workers that received an unregistered task: {unregistered}")
    return {"jobs": len(jobs), **{status: statuses[status] for status in sorted(TERMINAL)},
            "jobs_across_the_roll": crossed}
