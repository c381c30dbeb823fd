"""Benchmark 1: what one agent step costs in a job, beside one task of a bare Celery chain on the same workers.

What is measured, one job or chain at a time, on the same Redis and the same worker processes:

- jobs through the API (``POST /v1/search``, no response agents) whose first agent, ``bench_skip_search``, asks
  for no search, so every job is its agent steps plus core_search, generate_answer and assemble without their
  variable work (an embedding, a Milvus query); "with": N no-op pre-search agents after it
  (``agentsearch.bench.agents``), "without": none. A job's wall time is ``finished_at - created_at`` of its row: from
  the API creating it to ``assemble`` ending it. Each job has a query of its own, so no cache answers for it: every
  agent step takes the runner's whole path (breaker, cache lookup and lock, deadline thread, cache write, metrics).
- Celery chains of N + 1 and of 1 no-op tasks (``agentsearch.bench.noop_tasks``), sent from this process with the agent
  steps' time limits and a payload the size of a job's first state; a chain's wall time runs from just before
  ``apply_async`` to the end stamp its last task returns.

    hop = (median wall time with - median wall time without) / N

for each, and their ratio. The four kinds alternate in a rotating order, so load on the machine falls on all.

``--baseline DIR`` starts a second stack whose processes run the code of another tree (a git worktree of an
earlier commit, say) and measures both in the same run, every round running each kind on each stack: a change is
measured against what it replaced under the same load.

    .venv/bin/python -m agentsearch.bench.hop --agents 20 --jobs 30 [--json out.json]
    .venv/bin/agentsearch bench hop --agents 20 --jobs 30 --json out.json      # the same
    git worktree add /tmp/hop-before HEAD~1
    .venv/bin/python -m agentsearch.bench.hop --agents 5 --jobs 40 --baseline /tmp/hop-before
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from agentsearch.bench.agents import noop_agent_ids
from agentsearch.bench.common import Target, bench_stack, job_wall_ms, summary, wait_idle

BASE_AGENTS = ["bench_skip_search"]
RAW_TASK = "bench.noop"
KINDS = ("pipeline_with", "pipeline_without", "raw_with", "raw_without")


def hop_figures(agents: int, pipeline_with: list[float], pipeline_without: list[float], raw_with: list[float],
                raw_without: list[float]) -> dict[str, float]:
    """Milliseconds per hop from wall times with and without the N extra steps, and pipeline / raw."""
    if agents < 1:
        raise ValueError("the hop needs at least one agent")
    pipeline = (statistics.median(pipeline_with) - statistics.median(pipeline_without)) / agents
    raw = (statistics.median(raw_with) - statistics.median(raw_without)) / agents
    return {"pipeline_hop_ms": round(pipeline, 3), "raw_celery_hop_ms": round(raw, 3),
            "ratio": round(pipeline / raw, 3) if raw > 0 else float("inf")}


def _celery_client(target: Target):
    from celery import Celery

    client = Celery("agentsearch-bench", broker=target.broker_url, backend=target.result_backend)
    client.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"])
    return client


def _collection(target: Target) -> str:
    """An empty collection: the jobs never search it."""
    with target.http() as http:
        created = http.post("/v1/collections", json={"name": f"bench-hop-{uuid.uuid4().hex[:8]}"})
        created.raise_for_status()
        return created.json()["id"]


def _first_state(collection_id: str) -> dict:
    """A payload the size of a job's first state, for the raw chain to carry."""
    from agentsearch.pipeline.job.job_state import JobState

    query = "benchmark solar energy raw 0000"
    return JobState(job_id=str(uuid.uuid4()), collection_id=collection_id, user_id=str(uuid.uuid4()), query=query,
                    original_query=query, collections={collection_id: 0}).dump()


def _raw_chain_ms(client, tasks: int, payload: dict) -> float:
    from celery import chain

    from agentsearch.worker.job_tasks import HARD_LIMIT_MARGIN_S, SOFT_LIMIT_MARGIN_S

    # The limits a job's agent step carries (default 30 s deadline): the pool's timer bookkeeping is Celery's cost.
    options = {"soft_time_limit": 30 + SOFT_LIMIT_MARGIN_S, "time_limit": 30 + HARD_LIMIT_MARGIN_S}
    canvas = chain(*[client.signature(RAW_TASK, options=options) for _ in range(tasks)])
    started = time.time()
    result = canvas.apply_async((payload,))
    ended = result.get(timeout=120)["at"]
    return (ended - started) * 1000


def _pipeline_job_ms(http, collection_id: str, agent_ids: list[str], query: str) -> float:
    response = http.post("/v1/search", params={"wait": 60}, json={
        "collection_id": collection_id, "query": query, "agents": BASE_AGENTS + agent_ids, "use_cache": False})
    job = response.json()
    if response.status_code != 200 or job.get("status") != "succeeded":
        raise RuntimeError(f"hop job did not succeed in time: {response.status_code} {response.text[:500]}")
    bad = [a for a in job["agents"] if a["status"] != "ok"]
    if bad:
        raise RuntimeError(f"a no-op agent did not end ok: {bad[0]}")
    return job_wall_ms(job)


def measure(target: Target, agents: int = 20, jobs: int = 30, warmup: int = 3,
            collection_id: str | None = None) -> dict:
    """Run the four kinds ``jobs`` times each (after ``warmup`` unrecorded rounds); figures and wall times."""
    return measure_side_by_side({"": target}, agents, jobs, warmup, collection_id)[""]


def measure_side_by_side(targets: dict[str, Target], agents: int = 20, jobs: int = 30, warmup: int = 3,
                         collection_id: str | None = None) -> dict[str, dict]:
    """``measure`` on several stacks at once, by label: each round runs every kind on every stack, in an order
    that rotates from round to round, so that the stacks share the machine's load."""
    agent_ids = noop_agent_ids(agents)
    walls: dict[str, dict[str, list[float]]] = {label: {kind: [] for kind in KINDS} for label in targets}
    with contextlib.ExitStack() as open_:
        run = {}
        for label, target in targets.items():
            cid = collection_id or _collection(target)
            payload = _first_state(cid)
            client = _celery_client(target)
            open_.callback(client.close)
            http = open_.enter_context(target.http())
            run[label] = {
                "pipeline_with": lambda i, h=http, c=cid: _pipeline_job_ms(h, c, agent_ids,
                                                                         f"benchmark solar energy hop with {i}"),
                "pipeline_without": lambda i, h=http, c=cid: _pipeline_job_ms(h, c, [],
                                                                            f"benchmark solar energy hop without {i}"),
                "raw_with": lambda i, cl=client, p=payload: _raw_chain_ms(cl, agents + 1, p),
                "raw_without": lambda i, cl=client, p=payload: _raw_chain_ms(cl, 1, p),
            }
        slots = [(label, kind) for kind in KINDS for label in targets]
        for i in range(-warmup, jobs):
            shift = i % len(slots)
            for label, kind in slots[shift:] + slots[:shift]:
                ms = run[label][kind](i)
                if i >= 0:
                    walls[label][kind].append(ms)
    results = {}
    for label, by_kind in walls.items():
        figures = hop_figures(agents, by_kind["pipeline_with"], by_kind["pipeline_without"], by_kind["raw_with"],
                              by_kind["raw_without"])
        results[label] = {**figures, "agents": agents, "jobs": jobs,
                          "wall_ms": {k: summary(v) for k, v in by_kind.items()}}
    return results


def run_baseline_and_this(agents: int, jobs: int, baseline: Path) -> dict:
    """Two stacks, this tree's and one whose processes run ``baseline``'s code, measured side by side."""
    with (tempfile.TemporaryDirectory(prefix="agentsearch-bench-") as tmp,
          bench_stack(Path(tmp) / "this") as this, _stack_of(baseline, Path(tmp) / "baseline") as before):
        wait_idle(this)
        wait_idle(before)
        both = measure_side_by_side({"baseline": Target.of(before), "this": Target.of(this)}, agents, jobs)
    ratio = both["this"]["pipeline_hop_ms"] / both["baseline"]["pipeline_hop_ms"]
    return {**both, "baseline_tree": str(baseline), "pipeline_hop_this_over_baseline": round(ratio, 3)}


@contextlib.contextmanager
def _stack_of(tree: Path, workdir: Path, **options):
    """A bench stack (``options`` as ``bench_stack`` takes them) whose API, workers and migrations import the code
    of ``tree`` (it needs the same packages)."""
    stack = bench_stack(workdir, **options)
    stack.env["PYTHONPATH"] = str(tree.resolve())
    with stack:
        yield stack


def run_standalone(agents: int, jobs: int, attach: bool = False) -> dict:
    """On a stack of its own (Redis, PostgreSQL database, milvus-lite, one worker of two processes, the API), or
    with ``attach`` on the running one the ``AGENTSEARCH_*`` settings point to (its workers must have been started
    with ``agentsearch.bench.common.BENCH_ENV``)."""
    if attach:
        from agentsearch.pipeline.platform.settings import get_settings

        settings = get_settings()
        if not (settings.api_url and settings.api_key and settings.broker_url and settings.result_backend) \
                or settings.embedded:
            raise RuntimeError("attach needs AGENTSEARCH_API_URL, AGENTSEARCH_API_KEY and a Redis broker "
                               "(AGENTSEARCH_BROKER_URL, AGENTSEARCH_RESULT_BACKEND)")
        return measure(Target(settings.api_url, settings.api_key, settings.broker_url, settings.result_backend),
                       agents, jobs)
    with tempfile.TemporaryDirectory(prefix="agentsearch-bench-") as tmp, bench_stack(Path(tmp)) as stack:
        wait_idle(stack)
        return measure(Target.of(stack), agents, jobs)


def public(result: dict) -> dict[str, float]:
    """What ``agentsearch bench hop --json`` writes."""
    return {k: result[k] for k in ("pipeline_hop_ms", "raw_celery_hop_ms", "ratio")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--attach", action="store_true", help="use the running stack of the AGENTSEARCH_* settings")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a tree (a git worktree of an earlier commit) whose code a second stack runs, "
                             "measured side by side with this one")
    args = parser.parse_args()
    if args.baseline:
        result = run_baseline_and_this(args.agents, args.jobs, args.baseline)
        print(json.dumps(result, indent=2))
        if args.json:
            args.json.write_text(json.dumps(result) + "\n")
        return
    result = run_standalone(args.agents, args.jobs, args.attach)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(public(result)) + "\n")


if __name__ == "__main__":
    main()
