"""A job end to end in the embedded mode beside its steps' own times, for kombu's polling and the publish's wake.

The embedded mode (``make demo``, ``agentsearch api`` with no servers) runs Celery on the in-process ``memory://``
broker with worker threads (``src/agentsearch/worker/embedded.py``). kombu's memory transport cannot block on a queue: a
worker thread that finds its queues empty sleeps ``polling_interval`` before it looks again (kombu's default 1 s), so
every hop between two steps of a job waited up to that. ``agentsearch.worker.memory_broker`` wakes it on the next
publish instead, ``polling_interval`` (``AGENTSEARCH_EMBEDDED_POLL_S``) being its longest wait. A side is a polling
interval with one of the two: ``0.01`` the publish's wake (the service's), ``timer:0.01`` kombu's sleep.

One process builds the embedded app as the unit tests' ``app`` fixture does (SQLite and Milvus Lite in a temporary
directory, the ONNX model of ``MODEL_CACHE_DIR``), ingests the sample corpus, and then, for each polling interval
in turn (the Celery app's transport options set before its worker threads start), in rounds with the order
rotating:

- the idle CPU of the whole process (``time.process_time()``) over ``--idle-s`` seconds with nothing to do;
- ``--jobs`` jobs with no agents (``"agents": []``: core_search, generate_answer, assemble) and as many with
  agents of the demo (two pre-search, one post-search, two response agents in a chord), each a query of its own
  and ``use_cache`` off, so no cache answers; each is ``POST /v1/search?wait=60``.

Per job: end to end is ``finished_at - created_at`` of its row; its steps' own time is the sum of ``timings_ms``
(each step's time from its start, the progress write included, to its output; response agents side by side count
as the longest of them); the ratio is the first over the second. The request's own time (the API's wait included)
is reported beside them.

Usage::

    .venv/bin/python -m agentsearch.bench.embedded_job          # kombu's 1 s sleep beside the default; writes the
    results .venv/bin/python -m agentsearch.bench.embedded_job --polls timer:0.01,0.01,1 --jobs 10 --rounds 2
    .venv/bin/agentsearch bench embedded --jobs 10 --json embedded.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kombu.transport import virtual

from agentsearch.bench.common import SAMPLE_CORPUS, load_average, write_result
from agentsearch.worker.memory_broker import Transport

OLD_POLL_S = 1.0
TIMER = "timer:"  # a side's prefix: kombu's own memory transport, which sleeps between two looks
RESULTS = "embedded_job.md"
# Agents of the demo (src/agentsearch/cli/demo.py) that need no LLM and render nothing heavy: language_detector and
# acronym_resolver before the search, deduplicator after it, executive_summary and email_draft side by side.
DEMO_AGENTS = ["language_detector", "acronym_resolver", "deduplicator", "executive_summary", "email_draft"]
QUESTIONS = [
    "What was Northwind Energy's revenue",
    "How much electricity did the wind and solar sites generate",
    "What was the adjusted EBITDA margin",
    "How much was spent on capital expenditure",
    "What is the notice period for employees",
    "Which sites had low wind speeds",
    "What does the power purchase agreement cover",
    "How did operations and maintenance services perform",
]


def default_poll_s() -> float:
    from agentsearch.pipeline.platform.settings import Settings

    return Settings.model_fields["embedded_poll_s"].default


@contextmanager
def embedded_app(data_dir: Path):
    """The embedded app with its data in ``data_dir`` and no ``AGENTSEARCH_*`` variable of the shell (its URLs
    would make it distributed); the variables are put back afterwards."""
    saved = {k: v for k, v in os.environ.items() if k.upper().startswith("AGENTSEARCH_")}
    for name in saved:
        del os.environ[name]
    os.environ["AGENTSEARCH_DATA_DIR"] = str(data_dir)
    # The jobs are submitted one after another, faster than a user's 60 a minute.
    os.environ["AGENTSEARCH_RATE_LIMIT_SEARCHES_PER_MINUTE"] = "100000"
    if "AGENTSEARCH_MODEL_CACHE_DIR" in saved:
        os.environ["AGENTSEARCH_MODEL_CACHE_DIR"] = saved["AGENTSEARCH_MODEL_CACHE_DIR"]
    try:
        from agentsearch.pipeline.platform.settings import get_settings

        get_settings.cache_clear()
        from agentsearch.api.app import create_app  # late: the worker's Celery app reads the settings at import time

        application = create_app()
        if not application.state.services.settings.embedded:
            raise RuntimeError("the app is not embedded: agentsearch.worker.app was imported with other settings")
        try:
            yield application
        finally:
            application.state.services.close()
    finally:
        for name in ("AGENTSEARCH_DATA_DIR", "AGENTSEARCH_RATE_LIMIT_SEARCHES_PER_MINUTE"):
            os.environ.pop(name, None)
        os.environ.update(saved)


class KombuSleep(Transport):
    """The service's memory transport with its consumers sleeping between two looks at empty queues, as kombu's own
    do: only the consumers' wait differs, and a publisher made with either rings for the other."""

    def drain_events(self, connection, timeout=None):
        return virtual.Transport.drain_events(self, connection, timeout)


def side_poll_s(side: str) -> float:
    """``"timer:0.01"`` or ``"0.01"``: the polling interval of the side."""
    return float(side.removeprefix(TIMER))


@contextmanager
def serving(application, side: str, key: str | None = None):
    """A client of ``application`` whose embedded worker threads wait as ``side`` says: the transport and its
    options are read when a worker thread connects, as its lifespan starts."""
    from fastapi.testclient import TestClient

    from agentsearch.worker.app import app as celery_app, broker_transport_options

    settings = application.state.services.settings
    celery_app.conf.broker_transport_options = broker_transport_options(
        settings.model_copy(update={"embedded_poll_s": side_poll_s(side)}))
    celery_app.conf.broker_transport = (f"{__name__}:KombuSleep" if side.startswith(TIMER)
                                        else "agentsearch.worker.memory_broker:Transport")
    with TestClient(application) as client:
        if key is not None:
            client.headers["Authorization"] = f"Bearer {key}"
        yield client


def idle_cpu(seconds: float) -> float:
    """CPU seconds this process spent per second of wall time over ``seconds`` with nothing to do."""
    cpu, wall = time.process_time(), time.monotonic()
    time.sleep(seconds)
    return (time.process_time() - cpu) / (time.monotonic() - wall)


def run_job(client, collection_id: str, query: str, agents: list[str]) -> dict:
    started = time.perf_counter()
    response = client.post("/v1/search", params={"wait": 60},
                           json={"collection_id": collection_id, "query": query, "agents": agents,
                                 "use_cache": False})
    request_ms = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"job not done within the wait: {response.status_code} {response.text[:300]}")
    job = response.json()
    if job["status"] != "succeeded":
        raise RuntimeError(f"job {job['job_id']} ended {job['status']}: {job.get('error')}")
    created, started_at = datetime.fromisoformat(job["created_at"]), datetime.fromisoformat(job["started_at"])
    end_to_end = datetime.fromisoformat(job["finished_at"]) - created
    steps_ms = sum(job["timings_ms"].values())
    return {"end_to_end_ms": end_to_end.total_seconds() * 1000, "steps_ms": steps_ms, "request_ms": request_ms,
            "to_first_step_ms": (started_at - created).total_seconds() * 1000, "steps": dict(job["timings_ms"])}


def median_of(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def side_figures(rows: list[dict]) -> dict:
    return {"jobs": len(rows), "end_to_end_ms": median_of(rows, "end_to_end_ms"),
            "steps_ms": median_of(rows, "steps_ms"), "request_ms": median_of(rows, "request_ms"),
            "to_first_step_ms": median_of(rows, "to_first_step_ms"),
            "ratio": statistics.median(r["end_to_end_ms"] / r["steps_ms"] for r in rows),
            "overhead_ms": statistics.median(r["end_to_end_ms"] - r["steps_ms"] for r in rows)}


def measure(polls: list[str], jobs: int, rounds: int, idle_s: float, agents: bool = True) -> dict:
    """Every side in ``polls`` (``parse_polls``) measured in each of ``rounds`` rounds, the order rotating."""
    documents = [json.loads(line) for line in SAMPLE_CORPUS.read_text().splitlines() if line.strip()]
    kinds = {"no agents": [], **({"demo agents": DEMO_AGENTS} if agents else {})}
    raw: dict[str, dict] = {p: {"idle_cpu": [], "load": [], **{k: [] for k in kinds}} for p in polls}
    counter = 0
    with tempfile.TemporaryDirectory(prefix="agentsearch-embedded-bench-") as tmp, embedded_app(Path(tmp)) as app:
        from agentsearch.devstack.ingest import ingest_through_api
        from agentsearch.pipeline.security.users import UserStore

        with serving(app, polls[-1]) as client:
            _, key = UserStore(app.state.services.db).create(f"bench-{uuid.uuid4().hex[:8]}")
            client.headers["Authorization"] = f"Bearer {key}"
            collection_id = ingest_through_api(client, "sample", documents)
            for names in kinds.values():  # the model and every agent loaded before anything is timed
                run_job(client, collection_id, "warm-up: what was the revenue?", names)
        for round_number in range(rounds):
            shift = round_number % len(polls)
            for poll_s in polls[shift:] + polls[:shift]:
                side = raw[poll_s]
                with serving(app, poll_s, key) as client:
                    time.sleep(1.0)  # the worker threads' start settles
                    side["load"].append(load_average()[0])
                    side["idle_cpu"].append(idle_cpu(idle_s))
                    for _ in range(jobs):
                        for kind, names in kinds.items():
                            counter += 1
                            query = f"{QUESTIONS[counter % len(QUESTIONS)]} (question {counter})?"
                            side[kind].append(run_job(client, collection_id, query, names))
    figures: dict[str, Any] = {"polls": polls, "jobs_per_kind": jobs * rounds, "rounds": rounds, "idle_s": idle_s,
               "documents": len(documents), "sides": {}}
    for poll, side in raw.items():
        figures["sides"][poll] = {"idle_cpu_per_s": statistics.median(side["idle_cpu"]),
                                  "load": side["load"], **{k: side_figures(side[k]) for k in kinds}}
    figures["raw"] = raw
    return figures


def public(figures: dict) -> dict:
    """The figures without the per-job rows."""
    return {k: v for k, v in figures.items() if k != "raw"}


def report(figures: dict, command: str, started: datetime, load: tuple[float, float, float]) -> str:
    lines = [
        "# A job end to end in the embedded mode, beside its steps' own times",
        "",
        f"{started:%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}; one process: the "
        "embedded app (SQLite, Milvus Lite, in-process Celery worker threads on the memory broker) in a temporary "
        f"directory, the sample corpus ({figures['documents']} documents) ingested; other work shared the machine "
        f"(load average at the start {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}; at each side's start in the table).",
        "",
        f"Command: `{command}`",
        "",
        f"Per side: the polling interval (`AGENTSEARCH_EMBEDDED_POLL_S`; {OLD_POLL_S:g} s is kombu's default), "
        "woken by a publish (`agentsearch.worker.memory_broker`, the service's) or, marked `timer:`, by kombu's sleep "
        "alone (the "
        f"old behaviour); {figures['rounds']} round(s), the order rotating; {figures['jobs_per_kind']} jobs of each "
        "kind, each `POST /v1/search?wait=60` with a query of its own and `use_cache` off. End to end: "
        "`finished_at - created_at`; steps: the sum of the job's `timings_ms`; ratio: the median of the jobs' "
        "end to end / steps; to the first step: `started_at - created_at` (the submission's work after the row, "
        "and the first hop); request: the client's time for the waiting request. Idle CPU: the process's CPU "
        f"seconds per second over {figures['idle_s']:g} s with no job (median of the rounds).",
        "",
        "| side | jobs | end to end p50 ms | steps p50 ms | end to end - steps p50 ms | ratio p50 "
        "| to the first step p50 ms | request p50 ms | idle CPU s/s | load |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for poll, side in figures["sides"].items():
        for kind in ("no agents", "demo agents"):
            if kind not in side:
                continue
            f = side[kind]
            lines.append(f"| {poll} | {kind} | {f['end_to_end_ms']:.0f} | {f['steps_ms']:.0f} | "
                         f"{f['overhead_ms']:.0f} | **{f['ratio']:.2f}** | {f['to_first_step_ms']:.0f} | "
                         f"{f['request_ms']:.0f} | "
                         f"{side['idle_cpu_per_s']:.4f} | {', '.join(f'{x:.2f}' for x in side['load'])} |")
    lines += ["", "A job with no agents is three steps (core_search, generate_answer, assemble) and three hops "
              "(the first from the API); with the demo agents: language_detector, acronym_resolver, core_search, "
              "deduplicator, generate_answer, executive_summary and email_draft in a chord, assemble.", ""]
    return "\n".join(lines)


def command_line(polls: list[str], jobs: int, rounds: int, idle_s: float, agents: bool) -> str:
    return (f".venv/bin/agentsearch bench embedded --polls {','.join(polls)} --jobs {jobs} "
            f"--rounds {rounds} --idle-s {idle_s:g}" + ("" if agents else " --no-agents"))


def parse_polls(text: str | None) -> list[str]:
    """``timer:1,0.02`` as ``["timer:1", "0.02"]``; None gives kombu's old sleep of 1 s and the setting's default
    with the publish's wake."""
    if not text:
        return [f"{TIMER}{OLD_POLL_S:g}", f"{default_poll_s():g}"]
    polls = [p.strip() for p in text.split(",") if p.strip()]
    try:
        if not polls or any(side_poll_s(p) <= 0 for p in polls):
            raise ValueError
    except ValueError:
        raise ValueError(f"--polls {text!r}: positive seconds, each maybe prefixed with {TIMER}, "
                         "comma-separated") from None
    return [f"{TIMER}{side_poll_s(p):g}" if p.startswith(TIMER) else f"{side_poll_s(p):g}" for p in polls]


def run(polls: list[str], jobs: int, rounds: int, idle_s: float, agents: bool = True) -> tuple[dict, str]:
    """Measured, and the report written to src/agentsearch/bench/results/embedded_job.md: the figures and the report."""
    started, load = datetime.now(UTC), load_average()
    figures = measure(polls, jobs, rounds, idle_s, agents)
    text = write_result(RESULTS, report(figures, command_line(polls, jobs, rounds, idle_s, agents), started, load))
    return figures, text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--polls", default=None, help="Sides: polling intervals in seconds, each woken by a publish "
                        f"or, prefixed {TIMER}, by kombu's sleep; comma-separated (default: {TIMER}{OLD_POLL_S:g} and "
                        "the setting's default).")
    parser.add_argument("--jobs", type=int, default=10, help="Jobs of each kind per polling interval and round.")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--idle-s", type=float, default=10.0, help="Seconds of idle CPU measured per side and round.")
    parser.add_argument("--no-agents", action="store_true", help="Jobs with no agents only.")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    figures, text = run(parse_polls(args.polls), args.jobs, args.rounds, args.idle_s, not args.no_agents)
    if args.json is not None:
        args.json.write_text(json.dumps(public(figures)) + "\n")
    print(text)


if __name__ == "__main__":
    main()
