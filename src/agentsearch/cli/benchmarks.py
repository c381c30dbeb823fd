"""``agentsearch bench``: the benchmarks one at a time; ``make bench`` runs them all
(``src/agentsearch/bench/suite.py``).

Usage::

    agentsearch bench hop --agents 20 --jobs 30 --json hop.json     # on a local stack of its own
    agentsearch bench hop --attach                                  # on the stack AGENTSEARCH_* point to
    agentsearch bench default-job --queries 20 --json job.json      # the uncached default job on SciFact
    agentsearch bench concurrency --jobs 200 --json many.json       # prefork beside a thread pool
    agentsearch bench concurrency --llm --jobs 16 --threads 8       # jobs answered by a local LLM server
    agentsearch bench filters --rows 10000                          # a metadata filter's cost in Milvus Lite
    agentsearch bench scale --chunks 10000,100000 --json scale.json # search, groups, memory as a collection grows
    agentsearch bench team-cache --viewers 10 --questions 5         # a team's cache hits, without and with groups
    agentsearch bench mcp --calls 40 --searches 10                  # an MCP tool call beside its API route
    agentsearch bench parse --pages 240 --ocr-pages 6               # pages/s per format, OCR, parsing's share
    agentsearch bench ingest --docs 1000 --workers 1,2 --json in.json  # through the stack beside the plain model
    agentsearch bench ingest --docs 5183 --workers 2 --baseline /tmp/before --no-plain   # before and after
    agentsearch bench ingest --no-stack --rounds 3 --baseline /tmp/before   # the README's command, whole, before/after
    agentsearch bench retention --jobs 10000 --json retention.json  # rows pruned per second on PostgreSQL
    agentsearch bench sources --pages 1000 --json sources.json      # a web source's run: documents/s, unchanged cost
    agentsearch bench sources --kind mail --pages 1000              # a mailbox on Dovecot: the same
    agentsearch bench sources --kind drive --pages 1000             # WebDAV (WsgiDAV), S3 (moto: --kind objects)
    agentsearch bench backup --reindex-docs 1000 --json backup.json # reindex chunks/s, backup and restore time
    agentsearch bench embedded --jobs 10 --json embedded.json      # embedded mode: a job beside its steps' times
    agentsearch bench generated-set --scifact-docs 1000 --size 200  # a generated set ranks search as the qrels do

The benchmarks are the ``bench`` package, installed with the project.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from agentsearch.cli.bench_quality import bench_generated_set, bench_retrieval
from agentsearch.cli.errors import fail


@click.group("bench")
def bench_group() -> None:
    """Benchmarks; `make bench` runs the whole suite and writes BENCHMARKS.md."""


@bench_group.command("hop")
@click.option("--agents", type=click.IntRange(1, 100), default=20, show_default=True,
              help="No-op agents per job, and extra tasks per raw chain (N).")
@click.option("--jobs", type=click.IntRange(1), default=30, show_default=True, help="Jobs and chains of each kind.")
@click.option("--attach", is_flag=True,
              help="Use the running stack of AGENTSEARCH_API_URL, _API_KEY, _BROKER_URL and _RESULT_BACKEND, whose "
                   "workers run with AGENTSEARCH_AGENT_MODULES='[\"agentsearch.bench.agents\"]' and "
                   "AGENTSEARCH_WORKER_IMPORTS='[\"agentsearch.bench.noop_tasks\"]'; "
                   "default: start a local stack of its own.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help='Write {"pipeline_hop_ms", "raw_celery_hop_ms", "ratio"} here.')
def bench_hop(agents: int, jobs: int, attach: bool, json_out: Path | None) -> None:
    """Per-agent hop: jobs with N no-op agents beside raw Celery chains of N no-op tasks, same Redis and workers."""
    from agentsearch.bench import hop  # the bench stack and its SQLAlchemy: see src/agentsearch/cli/__init__.py

    try:
        result = hop.run_standalone(agents, jobs, attach)
    except RuntimeError as exc:
        fail(str(exc))
    figures = hop.public(result)
    if json_out is not None:
        json_out.write_text(json.dumps(figures) + "\n")
    click.echo(json.dumps(figures))


@bench_group.command("default-job")
@click.option("--queries", type=click.IntRange(1), default=20, show_default=True,
              help="SciFact training claims, each run with and without the response agents.")
@click.option("--docs", type=click.IntRange(1), default=1000, show_default=True,
              help="The first N SciFact abstracts indexed (claims are those whose judged abstracts are all in them).")
@click.option("--attach", is_flag=True,
              help="Use the running stack of AGENTSEARCH_API_URL, _API_KEY, _REDIS_URL, _BROKER_URL and "
                   "_RESULT_BACKEND (its cache Redis is flushed before every job); default: start a local stack of "
                   "its own.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help='Write {"p50_ms_without_artifacts", "p50_ms_with_artifacts", "p95_ms_without_artifacts", '
                   '"p95_ms_with_artifacts", ...} here.')
def bench_default_job(queries: int, docs: int, attach: bool, json_out: Path | None) -> None:
    """Uncached default job on SciFact (benchmark 3): 3 pre-search agents, hybrid search, 3 post-search agents, the
    extractive answer, with and without the 4 response agents; the cache Redis flushed before every job."""
    from agentsearch.bench import scifact  # the bench stack and its SQLAlchemy: see src/agentsearch/cli/__init__.py

    try:
        figures = scifact.public(scifact.run_standalone(docs, queries, attach))
    except (RuntimeError, FileNotFoundError) as exc:
        fail(str(exc))
    if json_out is not None:
        json_out.write_text(json.dumps(figures) + "\n")
    click.echo(json.dumps(figures))


@bench_group.command("concurrency")
@click.option("--jobs", type=click.IntRange(1), default=200, show_default=True,
              help="Jobs submitted at once, each with two agents that wait 1 s and no search (with --llm: a search "
                   "and the LLM's answer each).")
@click.option("--threads", type=click.IntRange(1, 1024), default=None,
              help="Threads of the thread-pool worker (default: the benchmark's, see "
                   "src/agentsearch/bench/concurrency.py).")
@click.option("--llm", is_flag=True,
              help="Instead: jobs that search the sample corpus and are answered by a local LLM server "
                   "(llama-server, src/agentsearch/devstack/llm_server.py), with the server's slot use; "
                   "start with a few jobs.")
@click.option("--slots", type=click.IntRange(1, 64), default=4, show_default=True,
              help="With --llm: requests the LLM server answers at once.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help='Write {"thread_pool": {"jobs_per_s", "p50_ms", "p95_ms", "errors"}, "prefork": {...}} here '
                   '(with --llm: {"jobs_per_s", ..., "answers", "slot_use", "tokens_per_s"}).')
def bench_concurrency(jobs: int, threads: int | None, llm: bool, slots: int, json_out: Path | None) -> None:
    """Many waiting jobs at once on one worker host: a prefork worker of 2 processes beside a thread-pool worker,
    each on a local stack of its own; with --llm, jobs answered by a real LLM server and how its slots were used."""
    from agentsearch.bench import concurrency  # the bench stack and its SQLAlchemy: see src/agentsearch/cli/__init__.py

    threads = threads or concurrency.DEFAULT_THREADS
    if llm:
        figures = concurrency.measure_llm(jobs, threads, slots)
    else:
        figures = concurrency.public(concurrency.measure(jobs, threads))
    if json_out is not None:
        json_out.write_text(json.dumps(figures) + "\n")
    click.echo(json.dumps(figures))


@bench_group.command("filters")
@click.option("--rows", type=click.IntRange(100), default=10_000, show_default=True, help="Rows in each collection.")
@click.option("--repeat", type=click.IntRange(1), default=15, show_default=True, help="Searches per median.")
@click.option("--restricted", type=click.FloatRange(0, 1), default=0.2, show_default=True,
              help="Share of the rows restricted to one of four document groups.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help='Write {"rows", "<filter>": {"json_field", "dynamic_field"}, ..., "groups": {"<search>": {"ms", '
                   '"ratio", "hits", ...}}} (milliseconds) here.')
def bench_filters(rows: int, repeat: int, restricted: float, json_out: Path | None) -> None:
    """What a metadata filter costs a dense search in Milvus Lite: the JSON field jobs use beside dynamic fields; and
    the document-groups filter of a team collection's search beside no filter (also in
    src/agentsearch/bench/results/filter_cost.md)."""
    import os

    from agentsearch.bench import filter_cost  # pymilvus: see src/agentsearch/cli/__init__.py

    load = os.getloadavg()
    results = filter_cost.measure(rows, repeat, restricted)
    if json_out is not None:
        json_out.write_text(json.dumps(results) + "\n")
    filter_cost.RESULTS.write_text(filter_cost.report(
        results, f"agentsearch bench filters --rows {rows} --repeat {repeat} --restricted {restricted}", load))
    click.echo(filter_cost.table(results))


@bench_group.command("scale")
@click.option("--chunks", default="10000", show_default=True,
              help="Collection sizes, comma-separated (e.g. 10000,100000,1000000); filled in order, one collection.")
@click.option("--queries", type=click.IntRange(2, 500), default=20, show_default=True, help="Queries per case.")
@click.option("--sample", type=click.IntRange(10, 5183), default=2000, show_default=True,
              help="SciFact abstracts the model embeds; the other rows' vectors are derived from theirs.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help='Write {"sizes": [{"chunks", "dense_ms", "keyword_ms", "hybrid_ms", "hybrid_filter_ms", '
                   '"hybrid_groups_ms", "job_ms", "recall_at_10", "insert_chunks_per_s", "cold_load_s", '
                   '"milvus_rss_mb", ...}], ...} here (each *_ms {"p50", "p95", ...}).')
def bench_scale(chunks: str, queries: int, sample: int, json_out: Path | None) -> None:
    """Search, the document-groups filter, inserts, a cold load and the Milvus process's memory at each size of one
    collection on a milvus-lite server (also in src/agentsearch/bench/results/scale.json and scale.png)."""
    from agentsearch.bench import scale  # pymilvus: see src/agentsearch/cli/__init__.py

    try:
        sizes = sorted({int(size) for size in chunks.split(",")})
    except ValueError:
        fail(f"--chunks: sizes are whole numbers separated by commas, not {chunks!r}")
    if sizes[0] < 100:
        fail("--chunks: each size is at least 100 chunks")
    results = scale.measure(sizes, queries, sample)
    results["command"] = f"agentsearch bench scale --chunks {chunks} --queries {queries} --sample {sample}"
    text = json.dumps(results, indent=1) + "\n"
    if json_out is not None:
        json_out.write_text(text)
    (scale.RESULTS / "scale.json").write_text(text)
    scale.plot(results, scale.RESULTS / "scale.png")
    click.echo(scale.table(results))


@bench_group.command("team-cache")
@click.option("--viewers", type=click.IntRange(2, 100), default=10, show_default=True,
              help="Viewers of the team, each asking every question in turn.")
@click.option("--questions", type=click.IntRange(1, 8), default=5, show_default=True,
              help="Questions of the sample corpus each viewer asks.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help='Write {"no_groups": {"hit_rate", "hit_ms", "miss_ms", ...}, "groups": {...}} here.')
def bench_team_cache(viewers: int, questions: int, json_out: Path | None) -> None:
    """The whole-job cache hit rate of a team's viewers asking the same questions, without document groups and with
    them, and the request's time for hits and misses, on a local stack of its own
    (src/agentsearch/bench/results/team_cache.md)."""
    from datetime import UTC, datetime

    from agentsearch.bench import team_cache  # the bench stack and its SQLAlchemy: see src/agentsearch/cli/__init__.py

    started = datetime.now(UTC)
    try:
        result = team_cache.run(viewers, questions)
    except RuntimeError as exc:
        fail(str(exc))
    figures = team_cache.public(result)
    if json_out is not None:
        json_out.write_text(json.dumps(figures) + "\n")
    click.echo(team_cache.write(result, team_cache.command_line(viewers, questions), started))


@bench_group.command("mcp")
@click.option("--calls", type=click.IntRange(1), default=40, show_default=True, help="Collection listings each way.")
@click.option("--searches", type=click.IntRange(1), default=10, show_default=True, help="Searches each way.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the medians and 90th percentiles of each way here.")
def bench_mcp(calls: int, searches: int, json_out: Path | None) -> None:
    """An MCP tool call beside the API route it stands for (HTTP route, /mcp, stdio), on a local stack of its own."""
    from agentsearch.bench import mcp_calls  # the bench stack and the mcp client: see src/agentsearch/cli/__init__.py

    figures = mcp_calls.run(calls, searches)
    if json_out is not None:
        json_out.write_text(json.dumps(figures) + "\n")
    click.echo(json.dumps(figures, indent=2))


@bench_group.command("parse")
@click.option("--pages", type=click.IntRange(1), default=240, show_default=True,
              help="Places (pages, slides, rows, sections) per born-digital file.")
@click.option("--ocr-pages", type=click.IntRange(1), default=6, show_default=True, help="Scanned pages read by OCR.")
@click.option("--rounds", type=click.IntRange(1), default=3, show_default=True)
@click.option("--stack/--no-stack", default=True, show_default=True,
              help="Also measure parsing's share of ingestion on a local stack of its own.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help='Write {"formats": {format: {"median", ...}}, "ocr": {...}, "share": {...}} here.')
def bench_parse(pages: int, ocr_pages: int, rounds: int, stack: bool, json_out: Path | None) -> None:
    """Pages per second of each format's reader (through the parsing child process), OCR pages per second, and the
    share of ingestion time parsing takes for ten mixed files; the table goes to
    src/agentsearch/bench/results/parse.md."""
    from agentsearch.bench import (
        parse,  # the readers' renderers and the bench stack: see src/agentsearch/cli/__init__.py
    )

    result = parse.measure(pages, ocr_pages, rounds, stack)
    if json_out is not None:
        json_out.write_text(json.dumps(result) + "\n")
    click.echo(parse.write(result, parse.command_line(pages, ocr_pages, rounds, stack)))


@bench_group.command("ingest")
@click.option("--docs", type=click.IntRange(1), default=1000, show_default=True,
              help="The first N SciFact abstracts, through every stack each round.")
@click.option("--workers", default="1,2", show_default=True,
              help="Ingest worker processes: a stack of one `agentsearch worker --concurrency W` for each W listed.")
@click.option("--rounds", type=click.IntRange(1), default=3, show_default=True,
              help="Rounds; each runs every side once, the order rotating, and medians are reported.")
@click.option("--threads", default="share", show_default=True,
              help="Threads of a model pass in each process of this tree's stacks: share (the cores divided among "
                   "the processes), or a number (0: every core); several, comma-separated, are a stack each.")
@click.option("--baseline", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="A tree (a git worktree of an earlier commit) whose code stacks of their own run, one per W, "
                   "measured in the same rounds: before and after.")
@click.option("--plain/--no-plain", default=True, show_default=True,
              help="Measure the plain model too (--no-plain: before and after only, which saves its rounds).")
@click.option("--stack/--no-stack", default=True, show_default=True,
              help="Measure the distributed stacks (--no-stack: the README's command alone).")
@click.option("--embedded/--no-embedded", default=True, show_default=True,
              help="Measure the README's `agentsearch ingest docs.jsonl --collection NAME` in the embedded mode, whole "
                   "(start-up included), beside the plain model as a program of its own, and --baseline's command.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help='Write {"stack_chunks_per_s", "plain_model_chunks_per_s", "ratio", "workers", "scaling", '
                   '"before_after", "sides", "embedded_command", ...} here.')
def bench_ingest(docs: int, workers: str, rounds: int, threads: str, baseline: Path | None, plain: bool,
                 stack: bool, embedded: bool, json_out: Path | None) -> None:
    """Ingestion through a local stack (API, ingest workers, PostgreSQL, Redis, milvus-lite server) beside the
    plain model (sentence-transformers, fp32, batch 32) embedding the same chunks, in the same rounds; with one
    ingest process and with two, and before and after with --baseline. The table goes to
    src/agentsearch/bench/results/ingest.md."""
    from agentsearch.bench import (
        ingest,  # the bench stacks, torch and sentence-transformers: see src/agentsearch/cli/__init__.py
    )

    try:
        counts, settings = ingest.parse_counts(workers), ingest.parse_threads(threads)
    except ValueError as exc:
        fail(str(exc))
    from agentsearch.bench import ingest_command

    if not (stack or embedded):
        fail("--no-stack and --no-embedded leave nothing to measure")
    try:
        command = ingest_command.figures(ingest_command.measure(docs, rounds, baseline)) if embedded else None
        figures = ingest.public(ingest.measure(docs, counts, rounds, settings, baseline, plain)) if stack else None
    except (RuntimeError, FileNotFoundError) as exc:
        fail(str(exc))
    if json_out is not None:
        json_out.write_text(json.dumps({**(figures or {}), "embedded_command": command}) + "\n")
    line = ingest.command_line(docs, counts, rounds, settings, baseline, plain, stack, embedded)
    click.echo(ingest.write(figures, line, command))


@bench_group.command("retention")
@click.option("--jobs", type=click.IntRange(1), default=10_000, show_default=True,
              help="Finished jobs past retention, each with 2 artifacts, a webhook delivery with 2 attempts and a "
                   "conversation turn; as many recent ones stay.")
@click.option("--sqlite", is_flag=True, help="A SQLite file instead of a database on the machine's PostgreSQL.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help='Write {"rows_pruned", "seconds", "rows_per_s", "batch_rows", "counts", ...} here.')
def bench_retention(jobs: int, sqlite: bool, json_out: Path | None) -> None:
    """Rows pruned per second by one retention run with the default settings, on a fresh database."""
    from agentsearch.bench import retention  # SQLAlchemy and psycopg: see src/agentsearch/cli/__init__.py

    try:
        figures = retention.measure(jobs, sqlite)
    except RuntimeError as exc:
        fail(str(exc))
    if json_out is not None:
        json_out.write_text(json.dumps(figures) + "\n")
    click.echo(json.dumps(figures))


@bench_group.command("sources")
@click.option("--kind", type=click.Choice(["web", "mail", "drive", "objects"]), default="web", show_default=True,
              help="web: a site over http.server; mail: a mailbox on Dovecot (make services installs it); drive: a "
                   "WebDAV folder on WsgiDAV; objects: a bucket on moto's S3 server (both with the test extra).")
@click.option("--pages", type=click.IntRange(1), default=1000, show_default=True,
              help="Pages of the bench's site, linked from one index page (with --kind mail: messages; drive: "
                   "files; objects: objects).")
@click.option("--rounds", type=click.IntRange(1), default=5, show_default=True, help="Unchanged runs timed.")
@click.option("--sqlite", is_flag=True, help="A SQLite file instead of a database on the machine's PostgreSQL.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help='Write {"documents_per_s", "unchanged_run_s_median", "unchanged_run_requests_median", ...} here.')
def bench_sources(kind: str, pages: int, rounds: int, sqlite: bool, json_out: Path | None) -> None:
    """A web, mail, drive or objects source's run over a real server: documents per second, and an unchanged run's
    requests (IMAP commands) and time."""
    # SQLAlchemy and psycopg: see src/agentsearch/cli/__init__.py
    from agentsearch.bench import sources, sources_mail, sources_stores

    try:
        if kind in ("drive", "objects"):
            figures = sources_stores.measure(kind, pages, rounds, sqlite)
        else:
            figures = (sources_mail if kind == "mail" else sources).measure(pages, rounds, sqlite)
    except RuntimeError as exc:
        fail(str(exc))
    if json_out is not None:
        json_out.write_text(json.dumps(figures) + "\n")
    click.echo(json.dumps(figures))


@bench_group.command("backup")
@click.option("--reindex-docs", type=click.IntRange(1), default=1000, show_default=True,
              help="The first N SciFact abstracts are reindexed (the whole corpus is backed up and restored).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help='Write {"reindex": {"chunks_per_s", ...}, "backup": {"seconds", ...}, "restore": {...}} here.')
def bench_backup(reindex_docs: int, json_out: Path | None) -> None:
    """Reindex chunks per second, backup and restore time on the SciFact corpus in PostgreSQL."""
    from agentsearch.bench import backup  # SQLAlchemy, psycopg and the model: see src/agentsearch/cli/__init__.py

    try:
        figures = backup.measure(reindex_docs)
    except (RuntimeError, FileNotFoundError) as exc:
        fail(str(exc))
    if json_out is not None:
        json_out.write_text(json.dumps(figures) + "\n")
    click.echo(json.dumps(figures))


@bench_group.command("embedded")
@click.option("--polls", default=None,
              help="Sides: polling intervals of the memory broker in seconds, each woken by a publish or, prefixed "
                   "timer:, by kombu's sleep alone; comma-separated (default: timer:1, kombu's old behaviour, and "
                   "the default of AGENTSEARCH_EMBEDDED_POLL_S).")
@click.option("--jobs", type=click.IntRange(1), default=10, show_default=True,
              help="Jobs with no agents, and as many with agents of the demo, per interval and round.")
@click.option("--rounds", type=click.IntRange(1), default=1, show_default=True,
              help="Rounds; each measures every interval once, the order rotating.")
@click.option("--idle-s", type=click.FloatRange(0.5), default=10.0, show_default=True,
              help="Seconds the process's idle CPU is measured, per interval and round.")
@click.option("--agents/--no-agents", default=True, show_default=True, help="Also the jobs with the demo's agents.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help='Write {"sides": {"<poll>": {"idle_cpu_per_s", "no agents": {"end_to_end_ms", "steps_ms", '
                   '"ratio", ...}, ...}}, ...} here.')
def bench_embedded(polls: str | None, jobs: int, rounds: int, idle_s: float, agents: bool,
                   json_out: Path | None) -> None:
    """A job end to end in the embedded mode beside the sum of its steps' own times, for kombu's polling of the
    memory broker and the publish's wake, in one process (src/agentsearch/bench/results/embedded_job.md)."""
    from agentsearch.bench import (
        embedded_job,  # the embedded app, its model and Milvus Lite: see src/agentsearch/cli/__init__.py
    )

    try:
        intervals = embedded_job.parse_polls(polls)
    except ValueError as exc:
        fail(str(exc))
    try:
        figures, text = embedded_job.run(intervals, jobs, rounds, idle_s, agents)
    except RuntimeError as exc:
        fail(str(exc))
    if json_out is not None:
        json_out.write_text(json.dumps(embedded_job.public(figures)) + "\n")
    click.echo(text)


# The quality benchmarks (search against the stored release, a generated set against the public qrels) live beside.
bench_group.add_command(bench_retrieval)
bench_group.add_command(bench_generated_set)
