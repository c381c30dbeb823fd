"""What the fault drills share: a stack with the drill agents, job submission and bookkeeping, and the figures.

The stack is the real deployment on this machine (``devstack.DevStack``) with a PostgreSQL server of its own,
so a drill can stop it without touching the machine's shared server, and ``agentsearch beat`` running the reaper.
Every figure a drill measures is written to ``.agentsearch/chaos/results.json`` (or ``$CHAOS_RESULTS``) and printed.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from agentsearch.devstack import REPO, DevStack, wait_for

SAMPLE_CORPUS = REPO / "src" / "agentsearch" / "examples" / "sample_corpus.jsonl"
RESULTS = Path(os.environ.get("CHAOS_RESULTS", REPO / ".agentsearch" / "chaos" / "results.json"))
TERMINAL = ("succeeded", "failed", "cancelled")

# Short enough that a drill sees the reaper act within minutes, long enough for 500 jobs to drain on two cores.
JOB_DEADLINE_S = 300
REAPER_INTERVAL_S = 5
SOFT_SHUTDOWN_S = 3
# How long after an agent call ends its task may still be storing the call's output (a loaded machine, a busy
# database); a kill in that span loses the output.
OUTPUT_LOST_WINDOW_S = 3.0


class ChaosStack(DevStack):
    def __init__(self, workdir: Path, workers: int = 2, concurrency: int = 1, **layout) -> None:
        """``layout``: DevStack's ``pool`` and ``queues`` of the first workers (default: prefork, every queue)."""
        self.call_logs = Path(workdir) / "calls"
        self.call_logs.mkdir(parents=True, exist_ok=True)
        super().__init__(
            workdir, workers=workers, concurrency=concurrency, user="chaos", own_postgres=True, beat=True,
            extra_env={
                "AGENTSEARCH_AGENT_MODULES": json.dumps(["tests.chaos.agents"]),
                "AGENTSEARCH_JOB_DEADLINE_S": str(JOB_DEADLINE_S),
                "AGENTSEARCH_REAPER_INTERVAL_S": str(REAPER_INTERVAL_S),
                "AGENTSEARCH_WORKER_SOFT_SHUTDOWN_TIMEOUT_S": str(SOFT_SHUTDOWN_S),
                # Two worker nodes on one host share its cores: one torch thread per pool process.
                "OMP_NUM_THREADS": "1",
                **layout.pop("extra_env", {}),
            },
            **layout,
        )
        self.collection_id = ""

    def start(self) -> None:
        super().start()
        documents = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
        self.collection_id = self.ingest("chaos-corpus", documents)

    def wait_workers_ready(self) -> None:
        for index in self.alive_workers():
            self.wait_worker_ready(index)

    def events(self, name: str) -> list[dict]:
        path = self.call_logs / f"{name}.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line] if path.exists() else []

    def calls(self, name: str, queries: set[str], in_flight: bool = False) -> int:
        """How many of these jobs (by query) have started a call of the drill agent ``name``; ``in_flight``: are in
        one now (started more calls than they finished), as its call log says."""
        started: Counter = Counter()
        finished: Counter = Counter()
        for event in self.events(name):
            if event["query"] in queries:
                (started if event["event"] == "start" else finished)[event["query"]] += 1
        return sum(1 for query, n in started.items() if not in_flight or n > finished[query])

    def wait_calls(self, name: str, queries: set[str], at_least: int = 1, in_flight: bool = False,
                   timeout_s: float = 120) -> None:
        """Wait until ``at_least`` of these jobs have started a call of the drill agent ``name`` (``in_flight``: are
        in one at the same time): the moment a fault has to land for the drill to test anything."""
        state = "in a {} call at once" if in_flight else "past the start of a {} call"
        wait_until(lambda: self.calls(name, queries, in_flight) >= at_least, timeout_s,
                   f"{at_least} drill job(s) {state.format(name)}")

    def wait_worker_gone(self, index: int, timeout_s: float = 30) -> None:
        """Wait until a worker node's main process has exited (after ``kill_worker``)."""
        wait_until(lambda: self.worker_procs[index].poll() is not None, timeout_s,
                   f"worker {index} ({self.worker_names[index]}) gone")

    def jobs(self, job_ids: list[str]) -> dict[str, dict]:
        rows = self.sql(
            "SELECT id::text, status, error, query, attempts, created_at, finished_at, deadline_at, stage_log, "
            "agent_runs, task_ids FROM jobs WHERE id = ANY(%s::uuid[])", job_ids)
        keys = ("id", "status", "error", "query", "attempts", "created_at", "finished_at", "deadline_at",
                "stage_log", "agent_runs", "task_ids")
        return {row[0]: dict(zip(keys, row)) for row in rows}

    def wait_terminal(self, job_ids: list[str], timeout_s: float) -> dict[str, dict]:
        """Poll the database (not the API) until every job has ended or the time is up."""
        deadline = time.monotonic() + timeout_s
        while True:
            rows = dict(self.sql("SELECT id::text, status FROM jobs WHERE id = ANY(%s::uuid[])", job_ids))
            if all(rows.get(j) in TERMINAL for j in job_ids) or time.monotonic() > deadline:
                return self.jobs(job_ids)
            time.sleep(1.0)


def wait_until(predicate, timeout_s: float, what: str) -> None:
    """``devstack.wait_for`` for a state a drill waits for (a predicate that raises counts as not yet), failing with
    the state that was not reached."""
    try:
        wait_for(predicate, timeout_s, what)
    except TimeoutError:
        raise AssertionError(f"not reached within {timeout_s:g} s: {what}") from None


def use_agents(stack: ChaosStack, *configs: dict) -> list[str]:
    """Make these agent configs the drill collection's whole agent set; returns their ids."""
    with stack.http() as http:
        ids = []
        for body in configs:
            created = http.post("/v1/agent-configs", json=body)
            assert created.status_code == 201, created.text
            ids.append(created.json()["id"])
        response = http.put(f"/v1/collections/{stack.collection_id}/agents",
                            json={"agents": [{"agent_config_id": i} for i in ids]})
        assert response.status_code == 200, response.text
    return ids


def use_drill_agents(stack: ChaosStack, **work) -> None:
    """One pre-search step and one response agent, both logging their side effects."""
    use_agents(stack, *({"agent_id": agent_id, "config": {"log_dir": str(stack.call_logs), **work}, "timeout_s": 60}
                        for agent_id in ("chaos_step", "chaos_responder")))


def search_body(stack: ChaosStack, query: str, **extra) -> dict:
    return {"collection_id": stack.collection_id, "query": query, "use_cache": False, **extra}


def submit(http: httpx.Client, body: dict, key: str | None = None,
           retry_until: float = 0.0) -> tuple[str | None, list[int]]:
    """POST /v1/search; a 503 (or a refused connection) is retried with the same Idempotency-Key, as a client
    should, until ``retry_until`` (monotonic). Returns the job id (None if never accepted) and every status seen."""
    codes: list[int] = []
    headers = {"Idempotency-Key": key} if key else {}
    while True:
        try:
            response = http.post("/v1/search", json=body, headers=headers)
            codes.append(response.status_code)
            if response.status_code in (200, 202):
                return response.json()["job_id"], codes
        except httpx.TransportError:
            codes.append(0)
        if time.monotonic() > retry_until:
            return None, codes
        time.sleep(0.5)


def submit_paced(stack: ChaosStack, bodies: list[dict], per_second: float, retry_s: float = 60.0,
                 threads: int = 8) -> tuple[list[str | None], Counter]:
    """Submit at a steady rate (as traffic arrives), each through ``submit`` with its own Idempotency-Key."""
    codes: Counter = Counter()
    lock = threading.Lock()
    started = time.monotonic()

    def one(i: int) -> str | None:
        time.sleep(max(0.0, started + i / per_second - time.monotonic()))
        with stack.http(timeout_s=60) as http:
            job_id, seen = submit(http, bodies[i], key=f"chaos-{os.getpid()}-{i}-{time.time_ns()}",
                                  retry_until=time.monotonic() + retry_s)
        with lock:
            codes.update(seen)
        return job_id

    with ThreadPoolExecutor(threads) as pool:
        ids = list(pool.map(one, range(len(bodies))))
    return ids, codes


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))], 3)


def latencies(rows: dict[str, dict]) -> list[float]:
    return [(r["finished_at"] - r["created_at"]).total_seconds() for r in rows.values() if r["finished_at"]]


def latency_figures(rows: dict[str, dict]) -> dict:
    values = latencies(rows)
    return {"p50_s": percentile(values, 0.5), "p95_s": percentile(values, 0.95),
            "max_s": round(max(values), 3) if values else None,
            "mean_s": round(statistics.fmean(values), 3) if values else None}


def side_effects(stack: ChaosStack, name: str, queries: set[str],
                 kills: list[tuple[int, float]] | None = None, one_task_per_process: bool = True) -> dict:
    """Calls of a drill agent for these jobs: re-executions (a call started again) and duplicates (completed twice).

    With ``kills`` (pid, time) a duplicate is told apart: if the process of the earlier completed call was killed
    within ``OUTPUT_LOST_WINDOW_S`` after that call ended, before it logged anything else (a process runs one task at
    a time, so it was still finishing that call's task: storing its artifact and output), the output died with its
    process and at-least-once delivery had to run the call again (``..._after_output_lost``). Any other duplicate
    means a stored output was not reused: a bug. A thread-pool process runs many tasks at once
    (``one_task_per_process=False``): its other calls' lines say nothing of this one's task, so only the window counts.
    """
    events = sorted((e for e in stack.events(name) if e["query"] in queries), key=lambda e: e["t"])
    everything = sorted(stack.events(name), key=lambda e: e["t"])
    starts = Counter(e["query"] for e in events if e["event"] == "start")
    done = Counter(e["query"] for e in events if e["event"] == "done")
    lost_outputs = 0
    for query in (q for q, n in done.items() if n > 1):
        calls = [e for e in events if e["query"] == query]
        for i, first in enumerate(calls):
            if first["event"] != "done" or not any(e["event"] == "start" for e in calls[i + 1:]):
                continue
            after = next((e["t"] for e in everything if e["pid"] == first["pid"] and e["t"] > first["t"]), None)
            if any(pid == first["pid"] and first["t"] <= at <= first["t"] + OUTPUT_LOST_WINDOW_S
                   and (after is None or at < after or not one_task_per_process) for pid, at in kills or []):
                lost_outputs += 1
    duplicated = sum(n - 1 for n in done.values() if n > 1)
    return {
        "calls_started": sum(starts.values()),
        "calls_completed": sum(done.values()),
        "jobs_with_a_call_started_again": sum(1 for n in starts.values() if n > 1),
        "duplicated_side_effects": duplicated,
        "duplicated_after_output_lost": min(lost_outputs, duplicated),
        "duplicated_with_output_stored": duplicated - min(lost_outputs, duplicated),
        "jobs_with_a_duplicated_side_effect": sum(1 for n in done.values() if n > 1),
    }


def record(scenario: str, figures: dict) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results[scenario] = {**figures, "recorded_at": time.strftime("%Y-%m-%d %H:%M:%S")}
    RESULTS.write_text(json.dumps(results, indent=2, default=str))
    print(f"\n[chaos] {scenario}: {json.dumps(figures, default=str)}")
