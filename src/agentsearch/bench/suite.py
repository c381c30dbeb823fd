"""The benchmark suite (``make bench``): seven measurements, one run, written to BENCHMARKS.md.

1. per-agent hop: a job step beside a bare Celery task (``src/agentsearch/bench/hop.py``);
2. whole-job cache hit through the API (``src/agentsearch/bench/cache_hit.py``);
3. uncached default job on SciFact, with and without artifacts (``src/agentsearch/bench/scifact.py``);
4. jobs/s with one worker process, then two, on waiting agents (``src/agentsearch/bench/throughput.py``);
5. ingestion through the stack beside the plain embedding model, with one ingest process and with two, and
   before and after with ``--ingest-baseline`` (``src/agentsearch/bench/ingest.py``, stacks of its own);
6. peak RSS of a worker process with the model loaded (``src/agentsearch/bench/scifact.py``);
7. many waiting jobs at once, prefork beside a thread pool, and the thread-pool worker's memory with the model in
   process and with an embeddings server (``src/agentsearch/bench/concurrency.py``, stacks of its own);
8. retrieval regression: SciFact training claims over the whole corpus against the previous release's stored
   figures, "regressed" past 0.005 nDCG@10 or 20% latency (``src/agentsearch/bench/retrieval_regression.py``);
9. scale at one size (``--scale-chunks``, 10,000): search, groups filter, inserts, cold load and the Milvus process's
   memory (``src/agentsearch/bench/scale.py``; its figures in suite.json, larger sizes by ``agentsearch bench scale``).

Order: 5 first (its stacks are stopped before the next one starts), then one stack (one worker, two prefork
processes) for 1, 2, 3 and 6, then a stack of one-process workers for 4. Medians and ratios come from this one run:
the machines are shared and noisy, so the load average is recorded before each benchmark. BENCHMARKS.md keeps
everything outside its generated block; the raw figures also go to ``src/agentsearch/bench/results/suite.json``.

    .venv/bin/python -m agentsearch.bench.suite                      # the full run (see below)
    .venv/bin/python -m agentsearch.bench.suite --quick              # small parameters, to try the suite out
    .venv/bin/python -m agentsearch.bench.suite --quiet-load 2.5 --quiet-wait-s 1200    # wait for a quiet machine first
    .venv/bin/python -m agentsearch.bench.suite --ingest-baseline /tmp/before   # 5 also: the whole corpus, before and
    after

Benchmarks 1 to 4, 6 and 7 took 8 to 15 minutes on 2 cores. Benchmark 5 runs 1,000 abstracts (2,019 chunks) three
times through the plain model and through stacks of one and two ingest processes: at the rates of runs of 50
abstracts at load 4 to 8 (the plain model 4 to 6 chunks/s, the stacks 1.3 to 2.8) that is over two hours there,
less on a quiet machine or a faster ingestion. ``--ingest-baseline`` adds the whole corpus (10,465 chunks) through
two stacks each round: at those rates more than two hours a round.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from agentsearch.bench import cache_hit, concurrency, hop, ingest, retrieval_regression, scale, scifact, throughput
from agentsearch.bench.common import REPO, Target, bench_stack, load_average, machine, wait_idle

BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
GOALS = {"hop_ratio": 1.25, "cache_hit_p50_ms": 5.0, "throughput_ratio": 1.8, "thread_pool_jobs_per_s": 15.0,
         "remote_worker_mib": 400.0, "default_job_p50_ms": 250.0}


def wait_for_quiet(threshold: float, wait_s: float) -> dict:
    """Poll the 1-minute load average until it is below ``threshold`` or ``wait_s`` has passed."""
    started = time.monotonic()
    while True:
        one = load_average()[0]
        if one < threshold or time.monotonic() - started >= wait_s:
            return {"threshold": threshold, "waited_s": round(time.monotonic() - started), "quiet": one < threshold,
                    "load_1m": one}
        print(f"load average {one:.2f} >= {threshold}: waiting", flush=True)
        time.sleep(15)


def run(args) -> dict:
    result: dict = {"started": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine(),
                    "loads": {}}
    if args.quiet_load:
        result["quiet"] = wait_for_quiet(args.quiet_load, args.quiet_wait_s)
    result["load_at_start"] = load_average()

    def step(name: str, fn):
        result["loads"][name] = load_average()
        print(f"== {name} (load {result['loads'][name][0]:.2f})", flush=True)
        started = time.monotonic()
        value = fn()
        print(json.dumps(value, default=str)[:2000], flush=True)
        result[name] = value
        result.setdefault("seconds", {})[name] = round(time.monotonic() - started, 1)

    step("ingest", lambda: ingest.public(ingest.measure(args.ingest_docs, args.ingest_workers, args.ingest_rounds,
                                                        args.ingest_threads)))
    if args.ingest_baseline:
        # The most processes and the first thread setting only: one before/after figure, not every side again.
        step("ingest_before_after", lambda: ingest.public(ingest.measure(
            args.ingest_baseline_docs, (max(args.ingest_workers),), args.ingest_rounds, args.ingest_threads[:1],
            args.ingest_baseline, plain=False)))
    with tempfile.TemporaryDirectory(prefix="agentsearch-bench-") as tmp:
        with bench_stack(Path(tmp) / "a", workers=1, concurrency=2) as stack:
            wait_idle(stack)
            target = Target.of(stack)
            step("hop", lambda: hop.measure(target, args.hop_agents, args.hop_jobs))
            step("cache_hit", lambda: cache_hit.measure(target, args.cache_requests))
            step("scifact", lambda: scifact.measure(stack, args.scifact_docs, args.scifact_queries))
        with bench_stack(Path(tmp) / "b", workers=1, concurrency=1) as stack:
            wait_idle(stack)
            step("throughput", lambda: throughput.measure(stack, args.throughput_jobs))
    step("concurrency", lambda: concurrency.measure(args.concurrency_jobs, args.concurrency_threads))
    step("retrieval", lambda: retrieval_regression.run(limit=args.retrieval_limit))
    step("scale", lambda: scale.measure([args.scale_chunks], queries=10))
    result["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    return result


# -- the report --------------------------------------------------------------------------------------------------


def _goal(value: float, goal: float, at_most: bool) -> str:
    met = value <= goal if at_most else value >= goal
    sign = "≤" if at_most else "≥"
    if met:
        return f"met ({value:.2f} {sign} {goal:g})"
    off = (value - goal) / goal * 100
    return f"**missed** by {abs(off):.0f}% ({value:.2f}, goal {sign} {goal:g})"


def _ms(v: float) -> str:
    return f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def _load(result: dict, name: str) -> str:
    one, five, fifteen = result["loads"][name]
    return f"load average at its start: {one:.2f}, {five:.2f}, {fifteen:.2f}"


def render(result: dict, command: str) -> str:
    m = result["machine"]
    one, five, fifteen = result["load_at_start"]
    quiet = result.get("quiet")
    lines = [
        BEGIN,
        "",
        f"Run of {result['started'][:19].replace('T', ' ')} UTC to {result['finished'][11:19]} UTC; "
        "medians and ratios from this one run.",
        "",
        f"Command: `{command}`",
        "",
        "| machine | |",
        "|---|---|",
        f"| `nproc` | {m['nproc']} |",
        f"| memory | {m['memory']} |",
        f"| CPU | {m['CPU model']} |",
        f"| Python | {m['Python']} |",
        f"| OS | {m['OS']} |",
        f"| load average at start (1, 5, 15 min) | {one:.2f}, {five:.2f}, {fifteen:.2f} |",
    ]
    if quiet:
        lines.append(f"| quiet window | {'reached' if quiet['quiet'] else 'not reached'}: 1-minute load "
                     f"{quiet['load_1m']:.2f} (threshold {quiet['threshold']:g}) after waiting {quiet['waited_s']} s |")
    lines += ["", "Every stack is `devstack.DevStack`: its own redis-server, a fresh PostgreSQL database on the "
              "machine's server, `milvus-lite server`, `agentsearch worker` prefork processes and `agentsearch api`.",
              ""]

    h = result["hop"]
    w = h["wall_ms"]
    lines += [
        "## 1. Per-agent hop",
        "",
        f"{h['jobs']} jobs of each kind, one at a time, kinds interleaved; {_load(result, 'hop')}. A job: "
        "`bench_skip_search` (a pre-search agent that asks for no search), then core_search, generate_answer and "
        f"assemble without their variable work, no response agents; \"with\": {h['agents']} no-op pre-search "
        "agents after it, each with a new query (no cache answers). A raw chain: "
        f"{h['agents']} + 1 no-op Celery tasks vs 1, on the same Redis and worker processes (one worker, two prefork "
        f"processes). Hop = (median with - median without) / {h['agents']}. Job wall time: `finished_at - "
        "created_at` of its row; chain: `apply_async` to the last task's end stamp.",
        "",
        "| | median with ms | median without ms | p95 with ms | ms per hop |",
        "|---|---:|---:|---:|---:|",
        f"| job through the pipeline | {_ms(w['pipeline_with']['p50'])} | {_ms(w['pipeline_without']['p50'])} | "
        f"{_ms(w['pipeline_with']['p95'])} | **{h['pipeline_hop_ms']:.2f}** |",
        f"| raw Celery chain | {_ms(w['raw_with']['p50'])} | {_ms(w['raw_without']['p50'])} | "
        f"{_ms(w['raw_with']['p95'])} | **{h['raw_celery_hop_ms']:.2f}** |",
        f"| ratio pipeline / raw | | | | **{h['ratio']:.2f}**: {_goal(h['ratio'], GOALS['hop_ratio'], True)} |",
        "",
    ]

    c = result["cache_hit"]
    lines += [
        "## 2. Whole-job cache hit through the API",
        "",
        f"{c['requests']} identical `POST /v1/search` answered from the stored response, interleaved with as many "
        "`GET /v1/collections/{id}` (authentication and one indexed read: the floor of an authenticated request), "
        f"one keep-alive connection, sequential; {_load(result, 'cache_hit')}.",
        "",
        "| request | p50 ms | p95 ms |",
        "|---|---:|---:|",
        f"| whole-job cache hit | **{_ms(c['cache_hit_ms']['p50'])}** | {_ms(c['cache_hit_ms']['p95'])} |",
        f"| authenticated collection read (floor) | {_ms(c['collection_read_ms']['p50'])} | "
        f"{_ms(c['collection_read_ms']['p95'])} |",
        f"| hit / floor, p50 | {c['ratio_p50']:.2f} | |",
        "",
        f"Goal p50 ≤ {GOALS['cache_hit_p50_ms']:g} ms: "
        f"{_goal(c['cache_hit_ms']['p50'], GOALS['cache_hit_p50_ms'], True)}.",
        "",
    ]

    s = result["scifact"]
    jw, jo = s["job_ms"]["with_artifacts"], s["job_ms"]["without_artifacts"]
    statuses = ", ".join(f"`{k}` {v}" for k, v in sorted(s["agent_statuses"].items()))
    lines += [
        "## 3. Uncached default job on SciFact",
        "",
        f"The first {s['docs']} SciFact abstracts (of 5,183), indexed through the API; {s['queries']} training claims "
        f"whose judged abstracts are all in that subset; {_load(result, 'scifact')}. Pre-search: "
        f"{', '.join(f'`{a}`' for a in scifact.PRE_SEARCH)}; hybrid search; post-search: "
        f"{', '.join(f'`{a}`' for a in scifact.POST_SEARCH)}; extractive answer; response: "
        f"{', '.join(f'`{a}`' for a in scifact.RESPONSE)}. The cache Redis is flushed before every job (a "
        "collection's word counts and acronyms stay kept in the worker for its index epoch) and the whole-job cache "
        "bypassed; each claim runs both ways, in alternating order. One worker, two prefork "
        "processes. Time: `finished_at - created_at`.",
        "",
        "| job | p50 ms | p95 ms | min ms | max ms |",
        "|---|---:|---:|---:|---:|",
        f"| with the 4 response agents (artifacts rendered) | **{jw['p50']:.0f}** | **{jw['p95']:.0f}** | "
        f"{jw['min']:.0f} | {jw['max']:.0f} |",
        f"| without response agents | **{jo['p50']:.0f}** | **{jo['p95']:.0f}** | {jo['min']:.0f} | {jo['max']:.0f} |",
        "",
        f"Agent outcomes over all jobs: {statuses}.",
        "",
    ]

    t = result["throughput"]
    rows = []
    for kind, label in (("waiting", "waiting only (no search to compute)"),
                        ("with_search", "waiting + hybrid search and extractive answer")):
        one_p, two_p = t[kind]["one_process"], t[kind]["two_processes"]
        rows += [f"| {label} | 1 process | {one_p['seconds']:.1f} | {one_p['jobs_per_s']:.3f} | "
                 f"{one_p['job_ms']['p50']:.0f} | |",
                 f"| | 2 processes | {two_p['seconds']:.1f} | {two_p['jobs_per_s']:.3f} | "
                 f"{two_p['job_ms']['p50']:.0f} | **{t[kind]['ratio']:.2f}** |"]
    lines += [
        "## 4. Throughput, one worker process vs two",
        "",
        f"{t['waiting']['one_process']['jobs']} jobs of a kind submitted at once, each with `bench_sleep_pre` and "
        f"`bench_sleep_post` (each sleeps {t['sleep_s_per_agent']:g} s, an LLM's wait without its CPU). \"Waiting "
        "only\": `bench_skip_search` asks for no search, so nothing else computes (as when an LLM endpoint answers); "
        "\"with search\": hybrid search over the sample corpus and the extractive answer, which embed text on this "
        "machine's CPU. First one `agentsearch worker --concurrency 1`, then a second one beside it (two worker "
        "processes, concurrency 1 each). Jobs/s = jobs / (last `finished_at` - first `created_at`), after a warm-up "
        f"batch; {_load(result, 'throughput')}.",
        "",
        "| jobs | workers | seconds | jobs/s | job p50 ms | ratio 2 / 1 |",
        "|---|---|---:|---:|---:|---:|",
        *rows,
        "",
        f"Goal ≥ {GOALS['throughput_ratio']:g} (waiting agents): "
        f"{_goal(t['ratio'], GOALS['throughput_ratio'], False)}.",
        "",
    ]

    lines += ["## 5. Ingestion through the stack beside the plain model", "", *_ingest_lines(result), ""]

    mem = s["worker_memory"]
    children = [r for r in mem if r.get("role", "prefork child") == "prefork child"]
    peak = max(children, key=lambda r: r["vm_hwm_mib"])
    remote_goal = GOALS["remote_worker_mib"]
    lines += [
        "## 6. Peak RSS of a worker process",
        "",
        "`VmHWM` (peak resident set) of the worker of benchmark 3, read from `/proc/<pid>/status` after it had "
        "loaded the embedding model and run the SciFact jobs (indexing, searches, answers, artifacts); `Pss` from "
        "`/proc/<pid>/smaps_rollup` shares the pages the processes have in common (the model, loaded before the "
        "fork) among them.",
        "",
        "| process | VmHWM MiB | VmRSS MiB | Pss MiB |",
        "|---|---:|---:|---:|",
        *[f"| {r.get('role', 'prefork child')} | {r['vm_hwm_mib']:.0f} | {r['vm_rss_mib']:.0f} | "
          f"{r['pss_mib']:.0f} |" if "pss_mib" in r else
          f"| {r.get('role', 'prefork child')} | {r['vm_hwm_mib']:.0f} | {r['vm_rss_mib']:.0f} | |" for r in mem],
        "",
        f"Peak of a prefork process: **{peak['vm_hwm_mib']:.0f} MiB**.",
        "",
        *_concurrency_lines(result),
        *(retrieval_regression.report_lines(result["retrieval"]) if "retrieval" in result else []),
        "## Goals",
        "",
        "| benchmark | goal | result |",
        "|---|---|---|",
        f"| 1. hop ratio | ≤ {GOALS['hop_ratio']:g} | {_goal(h['ratio'], GOALS['hop_ratio'], True)} |",
        f"| 2. cache hit p50 | ≤ {GOALS['cache_hit_p50_ms']:g} ms | "
        f"{_goal(c['cache_hit_ms']['p50'], GOALS['cache_hit_p50_ms'], True)} |",
        f"| 3. default job p50, without artifacts | ≤ {GOALS['default_job_p50_ms']:g} ms | "
        f"{_goal(s['job_ms']['without_artifacts']['p50'], GOALS['default_job_p50_ms'], True)} |",
        f"| 4. throughput ratio, waiting agents | ≥ {GOALS['throughput_ratio']:g} | "
        f"{_goal(t['ratio'], GOALS['throughput_ratio'], False)} |",
        *([f"| 5. ingestion through the stack ÷ the plain model | ≥ {ingest.GOAL_RATIO:g} | "
           f"{_goal(result['ingest']['ratio'], ingest.GOAL_RATIO, False)} |"]
          if result["ingest"].get("ratio") is not None else []),
        *([f"| 7. thread pool, waiting jobs/s | ≥ {GOALS['thread_pool_jobs_per_s']:g} | "
           f"{_goal(result['concurrency']['thread_pool']['jobs_per_s'], GOALS['thread_pool_jobs_per_s'], False)} |"]
          if "concurrency" in result else []),
        *([f"| 7. thread-pool worker with an embeddings server, VmHWM | ≤ {GOALS['remote_worker_mib']:g} MiB | "
           f"{_goal(_main_hwm(result['concurrency']['thread_pool_remote_embeddings']), remote_goal, True)} |"]
          if "thread_pool_remote_embeddings" in result.get("concurrency", {}) else []),
        "",
        END,
    ]
    return "\n".join(lines)


def _ingest_lines(result: dict) -> list[str]:
    i, st = result["ingest"], result["scifact"]["ingest_through_stack"]
    if "sides" not in i:  # a run of the earlier, in-process benchmark 5 (--render-from an old suite.json)
        return [f"In one process only (the benchmark before the stack was measured): model "
                f"{i['model_chunks_per_s']:.1f} chunks/s, ingestion {i['ingest_chunks_per_s']:.1f}, ratio "
                f"{i['ratio']:.2f}."]
    lines = [
        f"The first {i['docs']} SciFact abstracts, {i['chunks']} chunks ({i['chunk_chars']} characters, "
        f"{i['overlap_chars']} overlap), median of {i['rounds']} rounds, the sides' order rotating; "
        f"{_load(result, 'ingest')} (`src/agentsearch/bench/ingest.py`). The plain model: sentence-transformers with "
        "the packaged "
        "all-MiniLM-L6-v2 weights, float32, batches of 32, in the benchmark's process, embedding each chunk once. "
        "A stack: its own Redis, PostgreSQL database, `milvus-lite server`, API and one `agentsearch worker --queues "
        "ingest --concurrency W` (W ingest processes), quiet and warmed up before the rounds; timed from the first "
        "`POST /v1/collections/{id}/documents` until every document is `indexed` (chunks and their sentences "
        f"embedded, BM25 text, Milvus, PostgreSQL). This tree's `AGENTSEARCH_EMBEDDING_RUNTIME`: `{i['runtime']}`.",
        "",
        *ingest.report_lines(i),
        "",
        f"Benchmark 3's indexing of its {st['documents']} abstracts ({st['chunks']} chunks; one worker of two "
        f"processes on every queue): {st['chunks_per_s']:.1f} chunks/s, one pass of {st['seconds']:.0f} s.",
    ]
    if "ingest_before_after" in result:
        b = result["ingest_before_after"]
        lines += ["", f"Before and after: the first {b['docs']} abstracts ({b['chunks']} chunks), a stack of each "
                      f"tree, before: `{b['baseline_tree']}`; median of {b['rounds']} rounds; "
                      f"{_load(result, 'ingest_before_after')}.", "", *ingest.report_lines(b)]
    return lines


def _main_hwm(layout: dict) -> float:
    return next(r["vm_hwm_mib"] for r in layout["memory"] if r["role"] == "main")


def _concurrency_lines(result: dict) -> list[str]:
    if "concurrency" not in result:
        return []
    k = result["concurrency"]
    rows = [("thread pool", k["thread_pool"]), ("prefork", k["prefork"])]
    lines = [
        "## 7. Many waiting jobs at once: a thread pool beside prefork processes",
        "",
        f"{k['thread_pool']['jobs']} jobs submitted at once (8 client threads), each `bench_sleep_pre`, "
        "`bench_skip_search`, `bench_sleep_post` (two 1-s waits, no search), on one worker host, each layout on a "
        "stack of its own: prefork, `agentsearch worker --pool prefork --concurrency 2` on every queue; thread pool, "
        f"`agentsearch worker --pool threads --queues celery --concurrency {k['threads']}` beside a prefork worker "
        f"of 1 process on `artifacts,ingest`; {_load(result, 'concurrency')}.",
        "",
        "| layout | jobs/s | p50 ms | p95 ms | errors |",
        "|---|---:|---:|---:|---:|",
        *[f"| {name} | **{r['jobs_per_s']:.2f}** | {r['p50_ms']:.0f} | {r['p95_ms']:.0f} | {r['errors']} |"
          for name, r in rows],
        f"| ratio thread pool / prefork | **{k['ratio']:.2f}** | | | |",
        "",
        "Memory of the thread-pool worker (`VmHWM`, MiB) after a further batch of "
        f"{k['thread_pool']['with_search']['jobs']} jobs with the same agents around a hybrid search of the sample "
        "corpus and the extractive answer:",
        "",
        "| thread-pool worker | VmHWM MiB | VmRSS MiB | jobs/s of that batch |",
        "|---|---:|---:|---:|",
    ]
    for name, key in (("model in process", "thread_pool"), ("embeddings server", "thread_pool_remote_embeddings")):
        if key in k:
            main = next(r for r in k[key]["memory"] if r["role"] == "main")
            lines.append(f"| {name} | **{main['vm_hwm_mib']:.0f}** | {main['vm_rss_mib']:.0f} | "
                         f"{k[key]['with_search']['jobs_per_s']:.2f} |")
    return [*lines, ""]


def write_report(block: str, path: Path) -> None:
    """Replace the generated block of ``path``, keeping what is written around it."""
    if path.exists() and BEGIN in (text := path.read_text()) and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        path.write_text(head + block + tail)
    else:
        path.write_text("# Benchmarks\n\n" + block + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small parameters, to try the suite out")
    parser.add_argument("--hop-agents", type=int, default=20)
    parser.add_argument("--hop-jobs", type=int, default=40)
    parser.add_argument("--cache-requests", type=int, default=300)
    parser.add_argument("--scifact-docs", type=int, default=1000)
    parser.add_argument("--scifact-queries", type=int, default=20)
    parser.add_argument("--throughput-jobs", type=int, default=12)
    parser.add_argument("--concurrency-jobs", type=int, default=200)
    parser.add_argument("--concurrency-threads", type=int, default=concurrency.DEFAULT_THREADS)
    parser.add_argument("--retrieval-limit", type=int, default=None, help="training claims (default: all 809)")
    parser.add_argument("--ingest-docs", type=int, default=1000)
    parser.add_argument("--ingest-rounds", type=int, default=3)
    parser.add_argument("--ingest-workers", type=ingest.parse_counts, default=(1, 2), help="ingest processes, e.g. 1,2")
    parser.add_argument("--ingest-threads", type=ingest.parse_threads, default=("share",),
                        help="threads of a model pass per ingest process: share, or a number (0: every core)")
    parser.add_argument("--ingest-baseline", type=Path, default=None,
                        help="a tree (a git worktree of an earlier commit) whose stack ingests beside this tree's")
    parser.add_argument("--ingest-baseline-docs", type=int, default=None,
                        help="abstracts for before and after (default: the whole SciFact corpus)")
    parser.add_argument("--scale-chunks", type=int, default=10_000, help="one collection size (bench scale)")
    parser.add_argument("--quiet-load", type=float, default=0.0, help="wait until the 1-minute load is below this")
    parser.add_argument("--quiet-wait-s", type=float, default=1200.0, help="for at most this long")
    parser.add_argument("--render-from", type=Path, default=None, metavar="SUITE_JSON",
                        help="only write the report, from the figures of an earlier run")
    parser.add_argument("--out", type=Path, default=None,
                        help="default BENCHMARKS.md (--quick: src/agentsearch/bench/results/quick.md)")
    args = parser.parse_args()
    if args.quick:
        args.hop_agents, args.hop_jobs, args.cache_requests = 5, 4, 20
        args.scifact_docs, args.scifact_queries, args.throughput_jobs = 60, 2, 3
        args.ingest_docs, args.ingest_rounds, args.concurrency_jobs = 30, 1, 20
        args.ingest_baseline_docs, args.retrieval_limit, args.scale_chunks = 30, 20, 2000
    if args.out is None:
        # A trial run must not replace the figures of a full one.
        results_dir = REPO / "src" / "agentsearch" / "bench" / "results"
        args.out = results_dir / "quick.md" if args.quick else REPO / "BENCHMARKS.md"
    if args.render_from:
        # The report again from a run's figures (after a change to its wording), with the command that made them.
        result = json.loads(args.render_from.read_text())
        write_report(render(result, result["command"]), args.out)
        print(f"wrote {args.out}")
        return
    command = " ".join([".venv/bin/python -m agentsearch.bench.suite", *map(shlex.quote, sys.argv[1:])])
    result = {"command": command, **run(args)}
    results = REPO / "src" / "agentsearch" / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    figures = json.dumps(result, indent=2, default=str) + "\n"
    (results / ("quick.json" if args.quick else "suite.json")).write_text(figures)
    write_report(render(result, command), args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
