"""Where an agent step's time goes: py-spy samples the worker's processes while hop jobs run, then a breakdown.

Needs py-spy (``.venv/bin/pip install py-spy``; attaching to a process needs ptrace rights, e.g. root). Starts a
stack like ``src/agentsearch/bench/hop.py``, runs jobs of N no-op agents back to back for ``--seconds``, sampling every
prefork process of the worker (``--idle``: waiting on a socket counts, because round trips are what a step waits for),
and prints the share of the steps' wall time under each frame below ``--anchor`` (``run_step``: each job's N agent
steps, its search and its answer; ``fast_trace_task``: whole tasks, Celery's own work included). ``--tree`` prints
the frames nested, ``--depth`` levels deep, those above ``--min-share`` percent; ``--from`` reads a kept ``--raw``
file again instead of starting a stack. Last comes what an agent step's task costs by part (``COSTS``), in
milliseconds of sampled wall time per step (the profiler slows every part) and as a share of the task.

    .venv/bin/python -m agentsearch.bench.profile_hop --seconds 40 [--raw out.txt] [--anchor run_step] [--depth 1]
    .venv/bin/python -m agentsearch.bench.profile_hop --from out.txt --anchor fast_trace_task --tree --depth 4
    --min-share 1 .venv/bin/python -m agentsearch.bench.profile_hop --from out.txt --jobs 37      # the parts again,
    from a kept file
"""

from __future__ import annotations

import argparse
import collections
import re
import tempfile
import time
from pathlib import Path

from agentsearch.bench import hop
from agentsearch.bench.agents import noop_agent_ids
from agentsearch.bench.common import Target, bench_stack, wait_idle
from agentsearch.bench.py_spy import py_spy, record

SITE = re.compile(r"\(/\S*/site-packages/")
LINE = re.compile(r":\d+\)$")
# The parts of an agent step's task, each by the frames that show it is under way; a sample counts for the first
# part one of its frames names (the deadline thread inside the cache's computation counts as the thread).
COSTS: list[tuple[str, tuple[str, ...]]] = [
    ("progress report (PostgreSQL)", ("JobStore.progress ",)),
    ("step ledger (Redis)", ("StepLedger.",)),
    ("agent deadline thread (start, wait)", ("call_with_deadline ",)),
    ("circuit breaker (Redis)", ("AgentBreaker.", "CircuitBreaker.")),
    ("result cache lookup and lock (Redis)", ("ResultCache.",)),
    ("runner's writes: cache, lock, metrics (Redis)", ("MetricsRecorder.", "send (src/agentsearch/pipeline/platform/",
                                                       "scope (src/agentsearch/pipeline/platform/redis_pipelining.py")),
    ("rest of the runner (agent, keys, record, spans)", ("AgentRunner.run ",)),
    ("rest of the step (state load, copy, dump)", ("run_step ",)),
]
CELERY = "Celery's own, per task (started, result, next message)"


def breakdown(raw: Path, anchor: str, depth: int = 1, top: int = 25) -> list[tuple[float, str]]:
    """Inclusive share of the samples under ``anchor`` for each frame up to ``depth`` levels below it."""
    total, shares = 0, collections.Counter[str]()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        at = next((i for i, f in enumerate(frames) if f.startswith(anchor + " ")), None)
        if at is None:
            continue
        total += int(count)
        for frame in dict.fromkeys(frames[at + 1 : at + 1 + depth]):
            shares[SITE.sub("(", frame)] += int(count)
    return [(100 * n / total, frame) for frame, n in shares.most_common(top)] if total else []


def _frame(frame: str, lines: bool) -> str:
    frame = SITE.sub("(", frame)
    return frame if lines else LINE.sub(")", frame)


def tree(raw: Path, anchor: str, depth: int = 3, min_share: float = 1.0, lines: bool = False) -> list[str]:
    """The frames below ``anchor`` nested ``depth`` levels deep, each with its inclusive share of the samples under
    ``anchor``; those under ``min_share`` percent left out. Call sites of one function are merged unless
    ``lines``."""
    total, root = 0, dict[str, list]()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        at = next((i for i, f in enumerate(frames) if f.startswith(anchor + " ")), None)
        if at is None:
            continue
        total += int(count)
        node = root
        for frame in frames[at + 1 : at + 1 + depth]:
            entry = node.setdefault(_frame(frame, lines), [0, {}])
            entry[0] += int(count)
            node = entry[1]
    out: list[str] = []

    def show(node: dict, level: int) -> None:
        for frame, (count, children) in sorted(node.items(), key=lambda item: -item[1][0]):
            if 100 * count / total >= min_share:
                out.append(f"{100 * count / total:5.1f}%  {'  ' * level}{frame}")
                show(children, level + 1)

    if total:
        show(root, 0)
    return out


def costs(raw: Path, jobs: int, agents: int, rate: int) -> list[tuple[str, float]]:
    """Milliseconds of sampled wall time per agent step for each part of ``COSTS``, then Celery's own per task (what
    every task of a job pays outside its function: a job has ``agents`` + 1 agent tasks and 3 others)."""
    parts, celery = collections.Counter[str](), 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if not any(f.startswith("fast_trace_task ") for f in frames):
            continue
        if not any("__protected_call__ " in f for f in frames):
            celery += int(count)
        elif any(f.startswith("pre_search_agent ") for f in frames):
            part = next((name for name, marks in COSTS if any(m in f for f in frames for m in marks)), None)
            if part is not None:
                parts[part] += int(count)
    steps, tasks = jobs * (agents + 1), jobs * (agents + 4)
    return [(name, 1000 * parts[name] / rate / steps) for name, _ in COSTS] + [(CELERY, 1000 * celery / rate / tasks)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--seconds", type=int, default=40)
    parser.add_argument("--rate", type=int, default=250, help="samples per second")
    parser.add_argument("--raw", type=Path, default=None, help="keep py-spy's collapsed stacks here")
    parser.add_argument("--anchor", default="run_step")
    parser.add_argument("--depth", type=int, default=1)
    parser.add_argument("--tree", action="store_true", help="frames nested down to --depth")
    parser.add_argument("--min-share", type=float, default=1.0, help="with --tree: leave out frames under this %%")
    parser.add_argument("--from", dest="from_raw", type=Path, default=None, help="a kept --raw file: no stack")
    parser.add_argument("--jobs", type=int, default=None, help="with --from: the jobs it sampled (of --agents)")
    args = parser.parse_args()
    if args.from_raw:
        _report(args.from_raw, args, args.jobs)
        return
    spy = py_spy()
    with tempfile.TemporaryDirectory(prefix="agentsearch-profile-") as tmp, bench_stack(Path(tmp)) as stack:
        wait_idle(stack)
        target = Target.of(stack)
        raw = args.raw or Path(tmp) / "stacks.txt"
        hop.measure(target, agents=args.agents, jobs=1, warmup=1)  # imports, connections, registry
        collection_id = hop._collection(target)
        recorder = record(spy, stack.worker_procs[0].pid, args.rate, raw, seconds=args.seconds)
        jobs, deadline = 0, time.monotonic() + args.seconds - 2
        with target.http() as http:
            while time.monotonic() < deadline:
                hop._pipeline_job_ms(http, collection_id, noop_agent_ids(args.agents), f"profile hop {jobs}")
                jobs += 1
        recorder.wait()
        print(f"{jobs} jobs, {jobs * (args.agents + 1)} agent steps sampled")
        _report(raw, args, jobs)


def _report(raw: Path, args: argparse.Namespace, jobs: int | None) -> None:
    if args.tree:
        print("\n".join(tree(raw, args.anchor, args.depth, args.min_share)))
    else:
        for share, frame in breakdown(raw, args.anchor, args.depth):
            print(f"{share:5.1f}%  {frame}")
    if jobs:
        parts = costs(raw, jobs, args.agents, args.rate)
        total = sum(ms for _, ms in parts)
        print("\n" + f"{'an agent step task, by part':56s} {'ms':>6s} {'share':>6s}")
        for name, ms in parts:
            print(f"{name:56s} {ms:6.2f} {100 * ms / total:5.1f}%")
        print(f"{'the whole task':56s} {total:6.2f}")


if __name__ == "__main__":
    main()
