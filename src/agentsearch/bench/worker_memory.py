"""What a thread-pool worker's memory is made of before its first job: resident MiB added by each part, in order.

In one fresh process, as ``agentsearch worker --pool threads --queues celery`` starts: the worker's task and hook
modules, then every registered agent's module (the registry imports them all), then the warm-up of the agents the
default queue runs (``agentsearch.worker.warmup``: the spell checker's dictionary, langdetect's profiles), then the
language model the search and the answer read texts with (``agentsearch.worker.warmup.warm_language_model`` loads it as
the worker starts; before, the first job did). Each row is the resident set (``VmRSS``) it added and the peak
(``VmHWM``) it reached. No embedding model is loaded (as with an embeddings server, ``AGENTSEARCH_EMBEDDING_URL``). What
the jobs add after this is benchmark 7's (``src/agentsearch/bench/concurrency.py``).

    .venv/bin/python -m agentsearch.bench.worker_memory [--json out.json]
    PYTHONPATH=/tmp/before .venv/bin/python /tmp/before/bench/worker_memory.py      # another tree, for a before
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import time
from pathlib import Path


def _status() -> tuple[float, float]:
    """This process's VmRSS and VmHWM, MiB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def measure() -> list[dict]:
    rows: list[dict] = []

    def step(part: str, action) -> None:
        before, _ = _status()
        started = time.perf_counter()
        detail = action()
        rss, hwm = _status()
        rows.append({"part": part, "added_mib": round(rss - before, 1), "rss_mib": round(rss, 1),
                     "hwm_mib": round(hwm, 1), "seconds": round(time.perf_counter() - started, 2),
                     **({"detail": detail} if detail else {})})

    step("interpreter", lambda: None)
    step("agentsearch.worker.app", lambda: importlib.import_module("agentsearch.worker.app") and None)
    from agentsearch.worker.app import HOOK_MODULES, TASK_MODULES
    for module in (*TASK_MODULES, *HOOK_MODULES):
        step(module, lambda module=module: importlib.import_module(module) and None)
    for entry in sorted(importlib.metadata.entry_points(group="agentsearch.agents"), key=lambda e: e.name):
        step(f"agent {entry.name}", lambda entry=entry: entry.load() and None)

    def warm() -> dict[str, float]:
        from agentsearch.pipeline.agents.registry import AgentRegistry
        from agentsearch.pipeline.platform.settings import get_settings
        from agentsearch.worker.app import DEFAULT_QUEUE
        from agentsearch.worker.warmup import stages_served, warm_agents
        return warm_agents(AgentRegistry.discover(get_settings().agent_modules), stages_served({DEFAULT_QUEUE}))

    step("warm-up (default queue)", warm)

    def language_model() -> None:
        from agentsearch.pipeline.retrieval import language
        language.warm_up()

    step("language model (py3langid)", language_model)
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| part | MiB added | VmRSS MiB | VmHWM MiB | s |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {r['part']} | {r['added_mib']:g} | {r['rss_mib']:g} | {r['hwm_mib']:g} | {r['seconds']:g} |"
              for r in rows if abs(r["added_mib"]) >= 1 or r is rows[-1]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows = measure()
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
