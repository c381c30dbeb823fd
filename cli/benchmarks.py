"""``agentsearch bench``: the benchmarks one at a time; ``make bench`` runs them all (``bench/suite.py``).

Usage::

    agentsearch bench hop --agents 20 --jobs 30 --json hop.json     # on a local stack of its own
    agentsearch bench hop --attach                                  # on the stack AGENTSEARCH_* point to
    agentsearch bench default-job --queries 20 --json job.json      # the uncached default job on SciFact

The benchmarks are the ``bench`` package, installed with the project.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from cli.errors import fail


@click.group("bench")
def bench_group() -> None:
    """Benchmarks; `make bench` runs the whole suite and writes BENCHMARKS.md."""


@bench_group.command("hop")
@click.option("--agents", type=click.IntRange(1, 100), default=20, show_default=True,
              help="No-op agents per job, and extra tasks per raw chain (N).")
@click.option("--jobs", type=click.IntRange(1), default=30, show_default=True, help="Jobs and chains of each kind.")
@click.option("--attach", is_flag=True,
              help="Use the running stack of AGENTSEARCH_API_URL, _API_KEY, _BROKER_URL and _RESULT_BACKEND, whose "
                   "workers run with AGENTSEARCH_AGENT_MODULES='[\"bench.agents\"]' and "
                   "AGENTSEARCH_WORKER_IMPORTS='[\"bench.noop_tasks\"]'; default: start a local stack of its own.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help='Write {"pipeline_hop_ms", "raw_celery_hop_ms", "ratio"} here.')
def bench_hop(agents: int, jobs: int, attach: bool, json_out: Path | None) -> None:
    """Per-agent hop: jobs with N no-op agents beside raw Celery chains of N no-op tasks, same Redis and workers."""
    from bench import hop  # the bench stack and its SQLAlchemy: see cli/__init__.py

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
    from bench import scifact  # the bench stack and its SQLAlchemy: see cli/__init__.py

    try:
        figures = scifact.public(scifact.run_standalone(docs, queries, attach))
    except (RuntimeError, FileNotFoundError) as exc:
        fail(str(exc))
    if json_out is not None:
        json_out.write_text(json.dumps(figures) + "\n")
    click.echo(json.dumps(figures))
