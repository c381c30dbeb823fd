"""Benchmarks 3 and 6: uncached default jobs on SciFact, with and without artifacts, and a worker's peak memory.

The first ``--docs`` SciFact abstracts are ingested through the API (their indexing rate through the stack is
reported beside benchmark 5). Then, for each of ``--queries`` SciFact training claims whose judged documents are
all in that subset, two jobs run one after the other, in alternating order: the default job (3 pre-search agents,
hybrid search, 3 post-search agents, the extractive answer, 4 response agents) and the same job without its
response agents. Before every job the cache Redis is flushed (agent results, query embeddings, search results,
the collection's lexicon) and the whole-job cache is bypassed, so each job computes everything that is not kept
per index epoch in the worker's own memory (the collection's word counts and acronyms, and the spell checker's
dictionary of them: see BENCHMARKS.md, "the default job"). A job's time is ``finished_at - created_at`` of its row
(from the API creating it to ``assemble`` ending it).

Then the peak resident memory (``VmHWM`` in ``/proc/<pid>/status``) of each prefork process of the worker: they
loaded the embedding model at start and have run the searches and answers above.

    .venv/bin/python -m agentsearch.bench.scifact [--docs 1000] [--queries 20]
    .venv/bin/agentsearch bench default-job --queries 20 --json out.json   # benchmark 3 alone (run_standalone)
    git worktree add /tmp/before <commit>
    .venv/bin/python -m agentsearch.bench.scifact --queries 20 --baseline /tmp/before  # 3, this tree beside another,
    one run
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

from agentsearch.bench.common import SCIFACT, Target, bench_stack, ingest, job_wall_ms, summary, wait_idle

PRE_SEARCH = ["language_detector", "acronym_resolver", "spell_checker"]
POST_SEARCH = ["reranker", "deduplicator", "relevance_filter"]
RESPONSE = ["executive_summary", "email_draft", "pdf_report", "pptx_generator"]


def subset(docs: int, queries: int, corpus: Path = SCIFACT / "corpus.jsonl",
           queries_path: Path = SCIFACT / "queries_train.jsonl", qrels_path: Path = SCIFACT / "qrels" / "train.tsv"):
    """The first ``docs`` abstracts, and the first ``queries`` claims all of whose judged documents are among them."""
    from agentsearch.pipeline.eval.retrieval import load_beir_corpus, load_beir_queries, load_qrels

    documents = load_beir_corpus(corpus)[:docs]
    ids = {d["id"] for d in documents}
    qrels = load_qrels(qrels_path)
    claims = [text for qid, text in load_beir_queries(queries_path).items()
              if qrels.get(qid) and set(qrels[qid]) <= ids]
    return documents, claims[:queries]


def chunk_count(documents: list[dict]) -> int:
    from agentsearch.pipeline.ingestion.chunking import ChunkingConfig, chunk_text
    from agentsearch.pipeline.platform.settings import Settings

    settings = Settings()
    config = ChunkingConfig(settings.chunk_chars, settings.chunk_overlap_chars)
    return sum(len(chunk_text(d["text"], config.max_chars, config.overlap_chars)) for d in documents)


def ingest_subset(target: Target, documents: list[dict]) -> tuple[str, dict]:
    """Index through the API and the worker; chunks/s from the first request to the last document indexed."""
    started = time.perf_counter()
    collection_id = ingest(target, "scifact", documents)
    seconds = time.perf_counter() - started
    chunks = chunk_count(documents)
    return collection_id, {"documents": len(documents), "chunks": chunks, "seconds": round(seconds, 2),
                           "chunks_per_s": chunks / seconds}


def _job(http, collection_id: str, query: str, agents: list[str]) -> dict:
    response = http.post("/v1/search", params={"wait": 60},
                         json={"collection_id": collection_id, "query": query, "agents": agents, "use_cache": False})
    job = response.json()
    if response.status_code != 200 or job.get("status") != "succeeded":
        raise RuntimeError(f"SciFact job did not succeed in time: {response.status_code} {response.text[:500]}")
    return job


KINDS = ("with_artifacts", "without_artifacts")


def measure_jobs(target: Target, redis_url: str, collection_id: str, claims: list[str]) -> dict:
    """Each claim as the default job with and without its response agents (alternating which goes first), after
    one warm-up job; wall times, per-stage medians (the jobs' ``timings_ms``) and the agents' outcomes."""
    return measure_side_by_side({"this": (target, redis_url, collection_id)}, claims)["this"]


def measure_side_by_side(stacks: dict[str, tuple[Target, str, str]], claims: list[str]) -> dict[str, dict]:
    """``measure_jobs`` on several stacks at once (label -> target, cache Redis URL, collection id): every claim
    runs each way on each stack, the order of the (stack, kind) slots rotating from one claim to the next, so load
    on the machine falls on all of them alike."""
    import redis

    agents = {"with_artifacts": PRE_SEARCH + POST_SEARCH + RESPONSE, "without_artifacts": PRE_SEARCH + POST_SEARCH}
    walls: dict[str, dict[str, list[float]]] = {label: {kind: [] for kind in KINDS} for label in stacks}
    stages: dict[str, dict[str, dict[str, list[float]]]] = {label: {kind: {} for kind in KINDS} for label in stacks}
    statuses: dict[str, dict[str, int]] = {label: {} for label in stacks}
    with contextlib.ExitStack() as open_:
        http = {label: open_.enter_context(target.http()) for label, (target, _, _) in stacks.items()}
        caches = {label: redis.Redis.from_url(url) for label, (_, url, _) in stacks.items()}
        for label, (_, _, collection_id) in stacks.items():  # first use: imports, fonts, model
            _job(http[label], collection_id, "warm-up: " + claims[0], agents["with_artifacts"])
        slots = [(label, kind) for kind in KINDS for label in stacks]
        for i, claim in enumerate(claims):
            shift = i % len(slots)
            for label, kind in slots[shift:] + slots[:shift]:
                caches[label].flushdb()
                job = _job(http[label], stacks[label][2], claim, agents[kind])
                walls[label][kind].append(job_wall_ms(job))
                for stage, ms in (job.get("timings_ms") or {}).items():
                    stages[label][kind].setdefault(stage, []).append(ms)
                for run in job["agents"]:
                    key = f"{run['agent_id']}:{run['status']}"
                    statuses[label][key] = statuses[label].get(key, 0) + 1
    return {label: {"queries": len(claims), "job_ms": {k: summary(v) for k, v in walls[label].items()},
                    "stage_p50_ms": {kind: {stage: round(statistics.median(v), 1) for stage, v in per.items()}
                                     for kind, per in stages[label].items()},
                    "agent_statuses": statuses[label]}
            for label in stacks}


def measure_default_job(target: Target, redis_url: str, docs: int, queries: int) -> dict:
    """Benchmark 3 on a running stack: the SciFact subset indexed through its API, then the jobs."""
    documents, claims = subset(docs, queries)
    if not claims:
        raise RuntimeError(f"no SciFact claim has all its judged abstracts among the first {docs}")
    collection_id, ingestion = ingest_subset(target, documents)
    return {"docs": docs, "ingest_through_stack": ingestion,
            **measure_jobs(target, redis_url, collection_id, claims)}


def run_standalone(docs: int, queries: int, attach: bool = False) -> dict:
    """Benchmark 3 on a stack of its own (Redis, a PostgreSQL database, milvus-lite, one worker of two prefork
    processes, the API), or with ``attach`` on the running one the ``AGENTSEARCH_*`` settings point to (its cache
    Redis, ``AGENTSEARCH_REDIS_URL``, is flushed before every job: never attach to a stack others use)."""
    if attach:
        from agentsearch.pipeline.platform.settings import get_settings

        settings = get_settings()
        if not (settings.api_url and settings.api_key and settings.redis_url and settings.broker_url
                and settings.result_backend) or settings.embedded:
            raise RuntimeError("attach needs AGENTSEARCH_API_URL, AGENTSEARCH_API_KEY, AGENTSEARCH_REDIS_URL and a "
                               "Redis broker (AGENTSEARCH_BROKER_URL, AGENTSEARCH_RESULT_BACKEND)")
        target = Target(settings.api_url, settings.api_key, settings.broker_url, settings.result_backend)
        return measure_default_job(target, settings.redis_url, docs, queries)
    with tempfile.TemporaryDirectory(prefix="agentsearch-bench-") as tmp, bench_stack(Path(tmp)) as stack:
        wait_idle(stack)
        return measure_default_job(Target.of(stack), stack.redis_url, docs, queries)


def run_baseline_and_this(docs: int, queries: int, baseline: Path) -> dict:
    """Benchmark 3 on two stacks at once, this tree's and one whose processes run ``baseline``'s code (a git worktree
    of an earlier commit): the subset indexed into both (side by side), then every claim on both."""
    from agentsearch.bench.hop import _stack_of

    documents, claims = subset(docs, queries)
    with (tempfile.TemporaryDirectory(prefix="agentsearch-bench-") as tmp,
          bench_stack(Path(tmp) / "this") as this, _stack_of(baseline, Path(tmp) / "baseline") as before):
        stacks = {"baseline": before, "this": this}
        for stack in stacks.values():
            wait_idle(stack)
        indexed: dict[str, tuple[str, dict]] = {}

        def index(label: str, stack) -> None:  # both at once: the slower one sets the wait
            indexed[label] = ingest_subset(Target.of(stack), documents)

        threads = [threading.Thread(target=index, args=item) for item in stacks.items()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if set(indexed) != set(stacks):
            raise RuntimeError("indexing the SciFact subset failed on a stack (see its worker log)")
        for stack in stacks.values():
            wait_idle(stack)
        both = measure_side_by_side({label: (Target.of(stack), stack.redis_url, indexed[label][0])
                                     for label, stack in stacks.items()}, claims)
    return {label: {"docs": docs, "ingest_through_stack": indexed[label][1], **both[label]} for label in stacks} | {
        "baseline_tree": str(baseline)}


def public(result: dict) -> dict:
    """What ``agentsearch bench default-job --json`` writes: p50 and p95 with and without artifacts, and more."""
    jobs = result["job_ms"]
    figures = {f"{q}_ms_{kind}": round(jobs[kind][q], 1) for q in ("p50", "p95", "min", "max")
               for kind in ("without_artifacts", "with_artifacts")}
    return {**figures, "queries": result["queries"], "docs": result["docs"],
            "stage_p50_ms": result["stage_p50_ms"], "agent_statuses": result["agent_statuses"]}


def memory_of(pid: int, role: str) -> dict:
    fields = {}
    for name in (f"/proc/{pid}/status", f"/proc/{pid}/smaps_rollup"):
        for line in Path(name).read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS", "Pss"):
                fields[key] = int(value.split()[0]) / 1024
    # The model is loaded in the main process before the fork: the children's VmHWM and VmRSS count its pages in
    # full although they are shared; Pss divides shared pages among the processes that map them.
    return {"pid": pid, "role": role, "vm_hwm_mib": round(fields["VmHWM"], 1), "vm_rss_mib": round(fields["VmRSS"], 1),
            "pss_mib": round(fields.get("Pss", 0.0), 1)}


def peak_memory(stack) -> list[dict]:
    """VmHWM, VmRSS and Pss (MiB) of the stack's first worker: its main process and every prefork process."""
    return [memory_of(stack.worker_procs[0].pid, "main"),
            *[memory_of(pid, "prefork child") for pid in stack.worker_children(0)]]


def measure(stack, docs: int, queries: int) -> dict:
    """Benchmarks 3 and 6 on the suite's stack."""
    return {**measure_default_job(Target.of(stack), stack.redis_url, docs, queries),
            "worker_memory": peak_memory(stack)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a tree (a git worktree of an earlier commit) whose code a second stack runs, "
                             "measured side by side with this one (benchmark 3 only)")
    args = parser.parse_args()
    if args.baseline:
        result = run_baseline_and_this(args.docs, args.queries, args.baseline)
        print(json.dumps({**{label: public(result[label]) for label in ("baseline", "this")},
                          "ingest_through_stack": {label: result[label]["ingest_through_stack"]
                                                   for label in ("baseline", "this")}}, indent=2))
        return
    with tempfile.TemporaryDirectory(prefix="agentsearch-bench-") as tmp, bench_stack(Path(tmp)) as stack:
        wait_idle(stack)
        print(json.dumps(measure(stack, args.docs, args.queries), indent=2))


if __name__ == "__main__":
    main()
