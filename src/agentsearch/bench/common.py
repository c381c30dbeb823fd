"""What the benchmarks share: the stack they run on, the machine they ran on, and small statistics.

Usage::

    with bench_stack(workdir, workers=1, concurrency=2) as stack:
        target = Target.of(stack)
        collection_id = ingest(target, "docs", documents)
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx

from agentsearch.devstack import DevStack, ingest_through_api
from agentsearch.pipeline.eval.retrieval import percentile

REPO = Path(__file__).resolve().parents[3]
SCIFACT = REPO.parent / "shared" / "eval" / "scifact"
SAMPLE_CORPUS = REPO / "src" / "agentsearch" / "examples" / "sample_corpus.jsonl"

# Every benchmark stack's workers know the bench agents and the raw no-op task (the API needs the agents too:
# it refuses a job that names an agent it does not know).
BENCH_ENV = {
    "AGENTSEARCH_AGENT_MODULES": json.dumps(["agentsearch.bench.agents"]),
    "AGENTSEARCH_WORKER_IMPORTS": json.dumps(["agentsearch.bench.noop_tasks"]),
}


def bench_stack(workdir: Path, workers: int = 1, concurrency: int = 2, extra_env: dict[str, str] | None = None,
                **kwargs) -> DevStack:
    return DevStack(workdir, workers=workers, concurrency=concurrency, extra_env={**BENCH_ENV, **(extra_env or {})},
                    **kwargs)


@dataclass(frozen=True)
class Target:
    """A running stack as a benchmark sees it: the API with a key, and the broker and result backend."""

    api_url: str
    api_key: str
    broker_url: str
    result_backend: str

    @classmethod
    def of(cls, stack: DevStack) -> Target:
        return cls(stack.api_url, stack.api_key, stack.env["AGENTSEARCH_BROKER_URL"],
                   stack.env["AGENTSEARCH_RESULT_BACKEND"])

    def http(self, timeout_s: float = 120) -> httpx.Client:
        return httpx.Client(base_url=self.api_url, timeout=timeout_s,
                            headers={"Authorization": f"Bearer {self.api_key}"})


def ingest(target: Target, name: str, documents: list[dict], timeout_s: float = 3600) -> str:
    """Create a collection, send the documents, wait until the workers indexed them all; the collection id."""
    with target.http() as http:
        return ingest_through_api(http, name, documents, timeout_s)


def job_wall_ms(job: dict) -> float:
    """A finished job's time in the system: from the row the API created to the moment ``assemble`` ended it."""
    created = datetime.fromisoformat(job["created_at"])
    finished = datetime.fromisoformat(job["finished_at"])
    return (finished - created).total_seconds() * 1000


def write_result(name: str, report: str) -> str:
    """``report`` written to src/agentsearch/bench/results/``name``, and returned."""
    out = REPO / "src" / "agentsearch" / "bench" / "results" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report)
    return report


def summary(values: list[float]) -> dict[str, float]:
    return {"p50": statistics.median(values), "p95": percentile(values, 0.95), "min": min(values),
            "max": max(values), "n": len(values)}


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()


def machine() -> dict[str, str]:
    cpu = "unknown"
    memory = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip() or str(os.cpu_count())
    return {
        "nproc": nproc,
        "memory": memory,
        "CPU model": cpu,
        "Python": platform.python_version(),
        "OS": platform.platform(),
    }


def _cpu_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime + stime


def wait_idle(stack: DevStack, timeout_s: float = 180, window_s: float = 2.0, also: Iterable[int] = ()) -> float:
    """Wait until the workers' processes, and the processes ``also`` names, stop computing (each prefork child
    loads the embedding model in a background thread after it reports ready): a benchmark must not share the CPU
    with that. Seconds waited."""
    started = time.monotonic()
    pids = [p.pid for p in stack.worker_procs] + [c for i in range(len(stack.worker_procs))
                                                   for c in stack.worker_children(i)] + list(also)
    before = sum(_cpu_ticks(p) for p in pids)
    while time.monotonic() - started < timeout_s:
        time.sleep(window_s)
        now = sum(_cpu_ticks(p) for p in pids)
        if now - before <= 0.05 * window_s * os.sysconf("SC_CLK_TCK"):  # under 5% of one core
            break
        before = now
    return time.monotonic() - started
