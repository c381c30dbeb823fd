"""Where the uncached default job's time goes: py-spy samples the worker while SciFact default jobs run.

Starts a stack like ``src/agentsearch/bench/scifact.py``, indexes the first ``--docs`` SciFact abstracts, runs one
warm-up job, then samples every prefork process of the worker (``--idle``: a step that waits for PostgreSQL, Redis or
Milvus waits in wall time too) while ``--queries`` claims run as default jobs, with and without the response agents, the
cache Redis flushed before each (as benchmark 3 does). It prints:

- the jobs' own ``timings_ms`` per stage and each agent's ``duration_ms`` (medians), the wall-clock view;
- the share of the sampled task time under each task (``pre_search_agent``, ``core_search``, ...);
- the share under each of the functions in ``WATCH`` (inclusive: a function counts for every sample it is on);
- the hottest leaf functions outside idle waits.

    .venv/bin/python -m agentsearch.bench.profile_job --docs 1000 --queries 10 [--raw stacks.txt] [--rate 100]
    .venv/bin/python -m agentsearch.bench.profile_job --from-raw stacks.txt        # the breakdown of stacks kept before
"""

from __future__ import annotations

import argparse
import collections
import re
import statistics
import tempfile
from pathlib import Path

from agentsearch.bench import scifact
from agentsearch.bench.common import Target, bench_stack, wait_idle
from agentsearch.bench.py_spy import py_spy, record

TASKS = ["pre_search_agent", "core_search", "post_search_agent", "write_answer", "response_agent", "assemble"]
# (label, qualified function names as py-spy shows them): what a step's time may be spent on. A sample counts for a
# label when any of its names is on the sample's stack; "A & B" needs both.
WATCH = [
    ("JobStore.progress (each step's database write)", "JobStore.progress"),
    ("step ledger (Redis)", "StepLedger.get", "StepLedger.put"),
    ("AgentRunner.run (breaker, cache, deadline thread, agent)", "AgentRunner.run"),
    ("  agent warm_up (first run in a process)", "AgentRunner._warm_up"),
    ("  result cache (Redis)", "ResultCache.get", "ResultCache.set"),
    ("  metrics (Redis)", "MetricsRecorder.record_agent_run", "MetricsRecorder.record_search"),
    ("language_detector", "LanguageDetector.run"),
    ("acronym_resolver", "AcronymResolver.run"),
    ("spell_checker", "SpellChecker.run"),
    ("  toolbox.vocabulary (PostgreSQL rows, word counts, Redis)", "AgentTools.vocabulary"),
    ("  toolbox.acronyms (PostgreSQL rows, mining, Redis)", "AgentTools.acronyms"),
    ("  toolbox.collection_texts (PostgreSQL)", "AgentTools.collection_texts"),
    ("  spell checker: collection dictionary", "SpellChecker._domain"),
    ("reranker", "Reranker.run"),
    ("  reranker: passage embeddings", "Reranker._dense"),
    ("deduplicator", "Deduplicator.run"),
    ("relevance_filter", "RelevanceFilter.run"),
    ("Retriever.search", "Retriever.search"),
    ("  query embedding", "Retriever.embed_query"),
    ("  Milvus dense + keyword search (two threads)", "VectorStore._search"),
    ("  near-duplicate check (Milvus vector get, cosine)", "Retriever._dedupe"),
    ("extractive answer", "extractive_answer"),
    ("  answer: sentence embeddings", "extractive_answer & Embedder.embed"),
    ("Embedder.embed, every caller", "Embedder.embed"),
    ("response agents + artifact save", "response_step"),
    ("  ArtifactStore.save (PostgreSQL)", "ArtifactStore.save"),
    ("  executive_summary", "ExecutiveSummary.run"),
    ("  email_draft", "EmailDraft.run"),
    ("  pdf_report", "PdfReport.run"),
    ("  pptx_generator", "PptxGenerator.run"),
    ("JobStore.succeed", "JobStore.succeed"),
]
# A step's agent runs in a deadline thread (one per call, or a pooled runner) and a search in two retriever threads
# while the task's own thread waits for them: their samples are counted against the task's time (the waiting
# thread's samples).
HELPER_THREADS = ("call_with_deadline.<locals>.target", "_Runner._loop", "Retriever._parallel.<locals>.run",
                  "ParallelRetrievers._run")
IDLE = {"Condition.wait", "Event.wait", "Thread.join", "Lock.acquire", "_wait_for_tstate_lock", "time.sleep",
        "select", "poll", "Connection.wait", "SocketBuffer._read_from_socket", "_UnaryUnaryMultiCallable._blocking",
        "BaseConnection._exec_command", "wait"}


def _frames(stack: str) -> list[tuple[str, str]]:
    out = []
    for frame in stack.split(";"):
        if frame.startswith("process "):
            continue
        m = re.match(r"^(?P<func>.+?) \((?P<file>.*?)(?::\d+)?\)$", frame)
        if m:
            out.append((m["func"], m["file"]))
    return out


def _matches(names: list[str], rule: tuple[str, ...]) -> bool:
    present = set(names)
    return any(all(part in present for part in wanted.split(" & ")) for wanted in rule[1:])


def breakdown(raw: Path, top: int = 20) -> dict:
    """Shares of the task time: per task, per watched function (inclusive), per hot leaf outside waits.

    The denominator is the samples of the tasks' own threads (wall time inside tasks, both prefork processes); a
    watched function is counted on any thread, so the work of a helper thread is set against its waiting task.
    """
    total = 0
    tasks, watched, leaves = collections.Counter[str](), collections.Counter[str](), collections.Counter[str]()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = _frames(stack)
        names = [f for f, _ in frames]
        n = int(count)
        task = next((f for f, path in frames if f in TASKS and path.endswith("agentsearch/worker/job_tasks.py")), None)
        helper = any(h in names for h in HELPER_THREADS)
        if task is None and not helper:
            continue
        if task is not None:
            total += n
            tasks[task] += n
        for rule in WATCH:
            if _matches(names, rule):
                watched[rule[0]] += n
        if frames and frames[-1][0] not in IDLE:
            func, path = frames[-1]
            leaves[f"{func} ({re.sub(r'^.*/site-packages/', '', path)})"] += n
    share = (lambda n: round(100 * n / total, 1)) if total else (lambda n: 0.0)
    return {"samples": total,
            "tasks": {t: share(tasks[t]) for t in TASKS},
            "watched": {rule[0]: share(watched[rule[0]]) for rule in WATCH},
            "hot_leaves": {k: share(v) for k, v in leaves.most_common(top)}}


def _median_table(jobs: list[dict]) -> dict:
    stages, agents = collections.defaultdict(list), collections.defaultdict(list)
    for job in jobs:
        for stage, ms in (job.get("timings_ms") or {}).items():
            stages[stage].append(ms)
        for run in job["agents"]:
            agents[run["agent_id"]].append(run["duration_ms"])
    return {"stages_ms": {k: round(statistics.median(v), 1) for k, v in stages.items()},
            "agents_ms": {k: round(statistics.median(v), 1) for k, v in agents.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--queries", type=int, default=8)
    parser.add_argument("--rate", type=int, default=100, help="samples per second")
    parser.add_argument("--raw", type=Path, default=None, help="keep py-spy's collapsed stacks here")
    parser.add_argument("--from-raw", type=Path, default=None, help="only print the breakdown of stacks kept before")
    args = parser.parse_args()
    if args.from_raw:
        report(breakdown(args.from_raw))
        return
    spy = py_spy()
    import redis

    with tempfile.TemporaryDirectory(prefix="agentsearch-profile-") as tmp, bench_stack(Path(tmp)) as stack:
        wait_idle(stack)
        target = Target.of(stack)
        documents, claims = scifact.subset(args.docs, args.queries)
        collection_id, _ = scifact.ingest_subset(target, documents)
        cache = redis.Redis.from_url(stack.redis_url)
        with_artifacts = scifact.PRE_SEARCH + scifact.POST_SEARCH + scifact.RESPONSE
        without = scifact.PRE_SEARCH + scifact.POST_SEARCH
        raw = args.raw or Path(tmp) / "stacks.txt"
        jobs: dict[str, list[dict]] = {"with_artifacts": [], "without_artifacts": []}
        with target.http() as http:
            scifact._job(http, collection_id, "warm-up: " + claims[0], with_artifacts)
            wait_idle(stack)
            recorder = record(spy, stack.worker_procs[0].pid, args.rate, raw, quiet=True)
            try:
                for i, claim in enumerate(claims):
                    order = [("with_artifacts", with_artifacts), ("without_artifacts", without)]
                    for kind, agents in order if i % 2 == 0 else order[::-1]:
                        cache.flushdb()
                        jobs[kind].append(scifact._job(http, collection_id, claim, agents))
            finally:
                recorder.send_signal(2)  # py-spy writes its stacks on SIGINT
                recorder.wait(60)
        from agentsearch.bench.common import job_wall_ms

        for kind, done in jobs.items():
            walls = [job_wall_ms(j) for j in done]
            print(f"== {kind}: {len(done)} jobs, wall p50 {statistics.median(walls):.0f} ms")
            table = _median_table(done)
            for group in ("stages_ms", "agents_ms"):
                print("  " + group + ": " + ", ".join(f"{k} {v}" for k, v in table[group].items()))
        report(breakdown(raw))


def report(result: dict) -> None:
    print(f"== py-spy: {result['samples']} samples inside tasks (both prefork processes, idle included)")
    for group in ("tasks", "watched", "hot_leaves"):
        print(f"-- {group} (% of the samples inside tasks)")
        for label, share in result[group].items():
            print(f"{share:6.1f}%  {label}")


if __name__ == "__main__":
    main()
