"""The ``agentsearch`` command line.

    agentsearch demo                                   ingest a sample corpus and run one search job end to end
    agentsearch api | worker | beat | flower | migrate run the services
    agentsearch ingest FILE --collection NAME          JSON Lines documents (id, title, text, metadata)
    agentsearch search "QUERY" --collection NAME [--agents a,b] [--wait] [--out DIR]
    agentsearch eval retrieval|answers ...             benchmark retrieval (BEIR) or answers (gold spans)
    agentsearch eval iterative ...                     iterative mode vs single-shot search (BEIR)
    agentsearch agents list [--json]                   the registered agents
    agentsearch users create NAME | list | new-key NAME | revoke PREFIX    API users and their keys
    agentsearch tools add NAME --kind mcp|http ... | list | remove NAME     tools agent configs may name
    agentsearch bench hop --agents N --jobs M [--json OUT]          per-agent hop vs a raw Celery chain

``ingest`` and ``search`` talk to the API at AGENTSEARCH_API_URL with AGENTSEARCH_API_KEY; unset, they start one in
this process and act as the local user.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from pipeline.platform.settings import get_settings

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLE_CORPUS = REPO_ROOT / "examples" / "sample_corpus.jsonl"
DEMO_QUERY = "What was Northwind Energy's revenue in Q4 2025, and how did it compare with Q4 2024?"
DEMO_AGENTS = [
    {"agent_id": "language_detector", "priority": 0},
    {
        "agent_id": "acronym_resolver",
        "priority": 10,
        "config": {"acronyms": {"PPA": "power purchase agreement", "LCOE": "levelized cost of energy", "Q4": "fourth quarter"}},
    },
    {"agent_id": "deduplicator", "priority": 0, "config": {"threshold": 0.5}},
    {"agent_id": "executive_summary", "priority": 0, "config": {"max_words": 120}},
    {"agent_id": "email_draft", "priority": 10},
    {"agent_id": "pptx_generator", "priority": 20},
    {"agent_id": "pdf_report", "priority": 30},
    {"agent_id": "chart_generator", "priority": 40},
    {"agent_id": "audio_summary", "priority": 50},
]


def fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


@click.group()
def main() -> None:
    """agentsearch: distributed agentic search."""


@main.command()
def migrate() -> None:
    """Bring the database schema up to date (Alembic)."""
    from migrations import upgrade

    settings = get_settings()
    settings.ensure_data_dir()
    upgrade(settings.database_url)
    click.echo(f"database at head: {settings.database_url.split('@')[-1]}")


@main.command()
@click.option("--host", default=None, help="Bind address (default AGENTSEARCH_API_HOST).")
@click.option("--port", type=int, default=None, help="Port (default AGENTSEARCH_API_PORT).")
def api(host: str | None, port: int | None) -> None:
    """Serve the HTTP API. In embedded mode the Celery worker threads run inside it."""
    import uvicorn

    from pipeline.observability.logs import configure_logging

    settings = get_settings()
    configure_logging(settings.log_format, settings.log_level)
    # log_config=None: uvicorn installs no handlers of its own, so its lines take the format configured above.
    uvicorn.run("api.app:create_app", factory=True, host=host or settings.api_host, port=port or settings.api_port,
                log_config=None)


@main.command()
@click.option("--queues", default="celery,artifacts", show_default=True, help="Queues to consume.")
@click.option("--concurrency", type=int, default=None, help="Worker processes (default AGENTSEARCH_WORKER_CONCURRENCY).")
@click.option("--loglevel", default="INFO", show_default=True)
@click.option("--beat", is_flag=True, help="Also run the periodic scheduler (the job reaper); in one worker only.")
@click.option("--hostname", default=None, help="Node name (Celery's -n), e.g. w1@%h for several workers on one host.")
def worker(queues: str, concurrency: int | None, loglevel: str, beat: bool, hostname: str | None) -> None:
    """Run a prefork Celery worker (distributed mode)."""
    settings = get_settings()
    if settings.embedded:
        fail("the worker needs a shared broker: set AGENTSEARCH_BROKER_URL (e.g. redis://127.0.0.1:6379/0); "
             "in embedded mode `agentsearch api` runs the workers itself")
    from worker.app import app as celery_app

    celery_app.worker_main(
        ["worker", "--pool=prefork", f"--concurrency={concurrency or settings.worker_concurrency}",
         f"--queues={queues}", f"--loglevel={loglevel}", "--task-events",
         *([f"--hostname={hostname}"] if hostname else []),
         *(["--beat", f"--schedule={settings.ensure_data_dir() / 'celerybeat-schedule'}"] if beat else [])]
    )


@main.command()
@click.option("--loglevel", default="INFO", show_default=True)
def beat(loglevel: str) -> None:
    """Run the periodic scheduler (the job reaper) on its own: exactly one per deployment."""
    settings = get_settings()
    if settings.embedded:
        fail("beat schedules onto a shared broker: set AGENTSEARCH_BROKER_URL (e.g. redis://127.0.0.1:6379/0); "
             "in embedded mode `agentsearch api` runs the reaper itself")
    from worker.app import app as celery_app

    celery_app.start(["beat", f"--schedule={settings.ensure_data_dir() / 'celerybeat-schedule'}",
                      f"--loglevel={loglevel}"])


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Bind address (0.0.0.0 in a container).")
@click.option("--port", type=int, default=5555, show_default=True)
@click.option("--max-tasks", type=int, default=10000, show_default=True, help="Tasks Flower keeps in memory.")
def flower(host: str, port: int, max_tasks: int) -> None:
    """Run Flower (Celery monitoring) on the broker, behind HTTP basic auth (AGENTSEARCH_FLOWER_BASIC_AUTH)."""
    settings = get_settings()
    if settings.embedded:
        fail("Flower watches a shared broker: set AGENTSEARCH_BROKER_URL (e.g. redis://127.0.0.1:6379/0)")
    try:
        credentials = settings.flower_credentials()
    except ValueError as exc:
        # Flower shows task arguments (queries) and can revoke tasks and shut workers down.
        fail(f"{exc}; Flower does not start without basic auth, e.g. AGENTSEARCH_FLOWER_BASIC_AUTH=admin:SECRET")
    # Handed over in the environment, not on the command line, which any local user can read.
    os.environ["FLOWER_BASIC_AUTH"] = ",".join(credentials)
    from worker.app import app as celery_app

    celery_app.start(["flower", f"--address={host}", f"--port={port}", f"--max_tasks={max_tasks}",
                      # Autoscaled workers come and go; forget the ones gone for 10 minutes.
                      "--purge_offline_workers=600"])


def _read_documents(path: Path) -> list[dict]:
    from pipeline.ingest import IngestError, read_documents

    if not path.is_file():
        fail(f"{path}: no such file")
    try:
        return [d.model_dump() for d in read_documents(path)]
    except (IngestError, UnicodeDecodeError) as exc:
        fail(f"{path}: {exc}")


@main.command()
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--collection", "collection_name", required=True, help="Collection name (created when missing).")
def ingest(file: Path, collection_name: str) -> None:
    """Ingest documents: JSON Lines (id, title, text, optional metadata per line), or one .txt / .md / .pdf file."""
    from api.client import ApiError, api_session

    documents = _read_documents(file)
    try:
        with api_session(get_settings()) as client:
            collection = client.ensure_collection(collection_name)
            client.add_documents(collection["id"], documents)
            with click.progressbar(length=len(documents), label=f"indexing {len(documents)} documents") as bar:
                done = [0]

                def progress(counts: dict) -> None:
                    finished = min(len(documents), counts["indexed"] + counts["failed"])
                    bar.update(max(0, finished - done[0]))
                    done[0] = max(done[0], finished)

                final = client.wait_indexed(collection["id"], on_progress=progress)
    except ApiError as exc:
        fail(str(exc))
    counts = final["documents"]
    click.echo(f"collection {collection_name} ({final['id']}): {counts['indexed']} indexed, {counts['failed']} failed")


def print_job(job: dict, written: list[Path]) -> None:
    response = job.get("response") or {}
    click.echo(f"job {job['job_id']}: {job['status']}" + (f" ({job['error']})" if job.get("error") else ""))
    if not response:
        return
    click.echo(f"\nquery:  {response['query']}")
    if response.get("search_query") != response["query"]:
        click.echo(f"search: {response['search_query']}")
    click.echo(f"\nanswer:\n  {response['answer']}\n\nsources:")
    for i, source in enumerate(response["sources"], start=1):
        click.echo(f"  [{i}] {source['title']} ({source['document_id']}, score {source['score']:.3f})")
    if response.get("cot_steps"):
        click.echo("\nreasoning:")
        for step in response["cot_steps"]:
            click.echo(f"  {step['step']}. {step['thought']}")
    click.echo("\nagents:")
    for run in response["agents"]:
        note = f" - {run['errors'][0]}" if run.get("errors") else ""
        hit = " (cache hit)" if run.get("cache_hit") else ""
        click.echo(f"  {run['stage']:<12} {run['agent_id']:<20} {run['status']:<12} {run['duration_ms']:>8.1f} ms{hit}{note}")
    if written:
        click.echo("\nartifacts:")
        for path in written:
            click.echo(f"  {path} ({path.stat().st_size} bytes)")


@main.command()
@click.argument("query")
@click.option("--collection", "collection_name", required=True)
@click.option("--agents", default=None, help="Comma-separated agent ids to run with default configs for this job.")
@click.option("--top-k", type=int, default=None)
@click.option("--cot", is_flag=True, help="Include chain-of-thought steps.")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait for the job to finish.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Write artifacts to this directory.")
@click.option("--json", "as_json", is_flag=True, help="Print the job as JSON.")
@click.option("--mode", type=click.Choice(["single", "iterative"]), default=None,
              help="iterative: evaluate, refine and search again until the target or the budget (agentic mode).")
def search(query: str, collection_name: str, agents: str | None, top_k: int | None, cot: bool, wait: bool,
           out: Path | None, as_json: bool, mode: str | None) -> None:
    """Submit a search job and (by default) wait for its answer."""
    from api.client import ApiError, api_session, write_artifacts

    settings = get_settings()
    if not wait and not settings.api_url:
        fail("--no-wait needs a running API (AGENTSEARCH_API_URL): an in-process one stops when this command ends")
    agent_list = [a.strip() for a in agents.split(",") if a.strip()] if agents is not None else None
    try:
        with api_session(settings) as client:
            collection = client.find_collection(collection_name)
            if collection is None:
                fail(f"no collection named {collection_name!r}; create it with `agentsearch ingest`")
            job_id = client.submit(collection["id"], query, agents=agent_list, top_k=top_k, cot=cot or None,
                                   mode=mode)
            if not wait:
                click.echo(job_id)
                return
            job = client.wait_job(job_id)
    except (ApiError, TimeoutError) as exc:
        fail(str(exc))
    written = write_artifacts(job, out) if out else []
    if as_json:
        click.echo(json.dumps(job, indent=2, default=str))
    else:
        print_job(job, written)
    if job["status"] != "succeeded":
        sys.exit(1)


@main.command()
@click.option("--out", type=click.Path(path_type=Path), default=Path("demo-out"), show_default=True)
@click.option("--query", default=DEMO_QUERY, show_default=True)
def demo(out: Path, query: str) -> None:
    """Ingest the sample corpus, configure agents, run one search job through the API and Celery."""
    from api.client import ApiError, api_session, write_artifacts

    settings = get_settings()
    documents = _read_documents(SAMPLE_CORPUS)
    mode = "distributed" if not settings.embedded else "embedded (SQLite, Milvus Lite, in-process Celery)"
    click.echo(f"mode: {mode}; data dir: {settings.data_dir.resolve()}")
    try:
        with api_session(settings) as client:
            job = _run_demo(client, documents, query)
    except ApiError as exc:
        fail(str(exc))
    print_job(job, write_artifacts(job, out))
    if job["status"] != "succeeded":
        sys.exit(1)


def _run_demo(client, documents: list[dict], query: str) -> dict:
    """Ingest, configure the demo agents, submit, wait: the job as the API returns it."""
    collection = client.ensure_collection("demo")
    client.add_documents(collection["id"], documents)
    counts = client.wait_indexed(collection["id"])["documents"]
    click.echo(f"ingested {counts['indexed']} documents into collection 'demo' ({collection['id']})")
    links = []
    for spec in DEMO_AGENTS:
        config = client.create_agent_config(name=f"demo {spec['agent_id']}", **spec)
        links.append({"agent_config_id": config["id"]})
    client.set_collection_agents(collection["id"], links)
    click.echo(f"agents: {', '.join(a['agent_id'] for a in DEMO_AGENTS)}")
    job_id = client.submit(collection["id"], query, cot=True)
    click.echo(f"submitted job {job_id}; waiting...")
    return client.wait_job(job_id)


@main.group()
def eval() -> None:  # noqa: A001 - the command is called "eval"
    """Measure retrieval and answers on benchmark data."""


@eval.command("retrieval")
@click.option("--corpus", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--queries", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--qrels", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--strategy", type=click.Choice(["semantic", "keyword", "hybrid", "adaptive"]), default=None,
              help="Default: the service's default strategy.")
@click.option("--fusion", type=click.Choice(["rrf", "weighted"]), default=None)
@click.option("--limit", type=int, default=None, help="Only the first N queries.")
@click.option("--agents", "agent_list", default=None,
              help="Pre- and post-search agents (default configs) around the search, e.g. query_expander,reranker.")
@click.option("--rerank-depth", type=int, default=20, show_default=True,
              help="With --agents: how many top results the post-search agents see.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None)
def eval_retrieval(corpus: Path, queries: Path, qrels: Path, strategy: str | None, fusion: str | None,
                   agent_list: str | None, rerank_depth: int,
                   limit: int | None, json_out: Path | None) -> None:
    """nDCG@10, Recall@100, MRR@10 and latency of a BEIR data set, through the retrieval path jobs use."""
    from pipeline.eval.retrieval import (
        ensure_corpus_indexed,
        load_beir_corpus,
        load_beir_queries,
        load_qrels,
        run_agents_eval,
        run_retrieval_eval,
        score_run,
    )
    from pipeline.retrieval.config import SearchConfig
    from pipeline.services import get_services

    try:
        judged = load_qrels(qrels)
        asked = {q: t for q, t in load_beir_queries(queries).items() if q in judged}
        n_docs = len(load_beir_corpus(corpus))
    except (ValueError, KeyError) as exc:
        fail(str(exc))
    if limit:
        asked = dict(list(asked.items())[:limit])
    settings = get_settings()
    overrides = {k: v for k, v in {"strategy": strategy, "fusion": fusion}.items() if v}
    config = SearchConfig(**{**settings.search_defaults(), **overrides, "top_k": 100, "candidates": 100})
    services = get_services()
    with click.progressbar(length=n_docs, label="indexing corpus ") as bar:
        collection, chunks, reused = ensure_corpus_indexed(services, corpus, progress=bar.update)
    click.echo(f"collection {collection}: {chunks} chunks ({'reused' if reused else 'indexed now'})")
    agent_ids = [a.strip() for a in agent_list.split(",") if a.strip()] if agent_list else []
    for agent_id in agent_ids:
        if agent_id not in services.registry or services.registry.get(agent_id).stage == "response":
            fail(f"--agents: {agent_id!r} is not a pre- or post-search agent")
    with click.progressbar(length=len(asked), label="running queries") as bar:
        if agent_ids:
            run, extra = run_agents_eval(services, collection, load_beir_corpus(corpus), asked, config, agent_ids,
                                         rerank_depth, progress=bar.update)
        else:
            run, extra = run_retrieval_eval(services, collection, asked, config, progress=bar.update)
    report = {**score_run(run, judged, extra["latencies_ms"]), "strategy": config.strategy, "fusion": config.fusion,
              "agents": agent_ids}
    click.echo(
        f"strategy {config.strategy} ({config.fusion}){' + ' + ','.join(agent_ids) if agent_ids else ''}: nDCG@10 {report['ndcg@10']:.4f}  Recall@100 "
        f"{report['recall@100']:.4f}  MRR@10 {report['mrr@10']:.4f}  latency p50 {report['latency_ms']['p50']:.1f} ms "
        f"p95 {report['latency_ms']['p95']:.1f} ms  ({report['queries']} queries)"
    )
    if json_out:
        json_out.write_text(json.dumps(report, indent=2) + "\n")


@eval.command("iterative")
@click.option("--corpus", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--queries", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--qrels", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--target", type=int, default=5, show_default=True, help="Results the iterative mode aims to keep.")
@click.option("--max-iterations", type=int, default=None, help="Budget; default: chosen by query complexity (1-3).")
@click.option("--per-iteration", type=int, default=5, show_default=True, help="New results evaluated per iteration.")
@click.option("--first-threshold", type=float, default=4.0, show_default=True)
@click.option("--later-threshold", type=float, default=3.8, show_default=True)
@click.option("--adaptive-threshold", is_flag=True, help="Move thresholds with each batch's score distribution.")
@click.option("--sufficiency/--no-sufficiency", default=True, show_default=True,
              help="Stop early when the kept results cover the query.")
@click.option("--llm/--no-llm", "use_llm", default=False, show_default=True,
              help="Evaluate and refine with the configured LLM (AGENTSEARCH_OPENAI_*) instead of offline signals.")
@click.option("--limit", type=int, default=None, help="Only the first N queries.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None)
def eval_iterative(corpus: Path, queries: Path, qrels: Path, target: int, max_iterations: int | None,
                   per_iteration: int, first_threshold: float, later_threshold: float, adaptive_threshold: bool,
                   sufficiency: bool, use_llm: bool, limit: int | None, json_out: Path | None) -> None:
    """Iterative mode vs single-shot search: share of queries with a relevant document in the kept set."""
    from pydantic import ValidationError

    from pipeline.agentic.config import IterativeConfig, Thresholds
    from pipeline.eval.agentic import run_iterative_eval
    from pipeline.eval.retrieval import (
        ensure_corpus_indexed,
        load_beir_corpus,
        load_beir_queries,
        load_qrels,
    )
    from pipeline.platform.llm import LLMClient
    from pipeline.services import get_services

    try:
        config = IterativeConfig(target=target, max_iterations=max_iterations, per_iteration=per_iteration,
                                 sufficiency=sufficiency, llm="auto" if use_llm else "off",
                                 thresholds=Thresholds(first=first_threshold, later=later_threshold,
                                                       adaptive=adaptive_threshold))
        judged = load_qrels(qrels)
        asked = {q: t for q, t in load_beir_queries(queries).items() if q in judged}
        n_docs = len(load_beir_corpus(corpus))
    except (ValidationError, ValueError, KeyError) as exc:
        fail(str(exc))
    if limit:
        asked = dict(list(asked.items())[:limit])
    services = get_services()
    llm = LLMClient.from_settings(services.settings) if use_llm else None
    if use_llm and llm is None:
        fail("--llm needs AGENTSEARCH_OPENAI_BASE_URL and AGENTSEARCH_OPENAI_MODEL")
    with click.progressbar(length=n_docs, label="indexing corpus ") as bar:
        collection, chunks, reused = ensure_corpus_indexed(services, corpus, progress=bar.update)
    click.echo(f"collection {collection}: {chunks} chunks ({'reused' if reused else 'indexed now'})")
    defaults = {**services.settings.search_defaults(), "candidates": 100}
    with click.progressbar(length=len(asked), label="running queries") as bar:
        report = run_iterative_eval(services, collection, asked, judged, config, defaults, llm=llm,
                                    progress=bar.update)
    it, single = report["iterative"], report["single_shot"]
    click.echo(
        f"iterative ({'LLM' if llm else 'offline'}): relevant in kept set {it['hit_rate']:.4f}, mean kept "
        f"{it['mean_kept']:.2f} (empty {it['empty_share']:.1%}), examined {it['mean_examined']:.2f}, iterations "
        f"{it['mean_iterations']:.2f}, stops {it['stop_reasons']}, p50 {it['latency_ms']['p50']:.0f} ms\n"
        f"single shot: top-{single['top_target']['k']} {single['top_target']['hit_rate']:.4f}, same size as kept "
        f"{single['matched_size']['hit_rate']:.4f}, same size as examined {single['examined_size']['hit_rate']:.4f}"
        f"  ({report['queries']} queries)"
    )
    if json_out:
        json_out.write_text(json.dumps(report, indent=2) + "\n")


@eval.command("answers")
@click.option("--corpus", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--queries", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--answers", "answers_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              required=True, help='JSON Lines of {"_id", "answers": [gold spans]}.')
@click.option("--limit", type=int, default=None, help="Only the first N questions.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--details", "details_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write each question's answer and hit as JSON Lines here.")
def eval_answers(corpus: Path, queries: Path, answers_path: Path, limit: int | None, json_out: Path | None,
                 details_out: Path | None) -> None:
    """Gold-span rate and latency of answers, through the search-and-answer path jobs use."""
    from pipeline.eval.answers import load_gold_answers, run_answer_eval
    from pipeline.eval.retrieval import (
        ensure_corpus_indexed,
        load_beir_corpus,
        load_beir_queries,
    )
    from pipeline.platform.llm import LLMClient
    from pipeline.services import get_services

    try:
        gold = load_gold_answers(answers_path)
        asked = {q: t for q, t in load_beir_queries(queries).items() if gold.get(q)}
        n_docs = len(load_beir_corpus(corpus))
    except (ValueError, KeyError) as exc:
        fail(str(exc))
    if not asked:
        fail(f"no question of {queries} has gold answers in {answers_path}")
    if limit:
        asked = dict(list(asked.items())[:limit])
    services = get_services()
    llm = LLMClient.from_settings(services.settings)
    with click.progressbar(length=n_docs, label="indexing corpus   ") as bar:
        collection, chunks, reused = ensure_corpus_indexed(services, corpus, progress=bar.update)
    click.echo(f"collection {collection}: {chunks} chunks ({'reused' if reused else 'indexed now'})")
    details: list[dict] = []
    with click.progressbar(length=len(asked), label="answering questions") as bar:
        report = run_answer_eval(services, collection, asked, gold, llm=llm, progress=bar.update, details=details)
    click.echo(
        f"answers ({'LLM ' + llm.model if llm else 'extractive'}): gold-span rate {report['gold_span_rate']:.4f}  "
        f"(gold span in the retrieved documents {report['gold_span_in_documents_rate']:.4f})  latency p50 "
        f"{report['latency_ms']['p50']:.1f} ms p95 {report['latency_ms']['p95']:.1f} ms  ({report['questions']} "
        "questions)"
    )
    if json_out:
        json_out.write_text(json.dumps(report, indent=2) + "\n")
    if details_out:
        details_out.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in details))


@main.group()
def agents() -> None:
    """The agent registry."""


@agents.command("list")
@click.option("--json", "as_json", is_flag=True, help='Print [{"id", "stage", "version", "config_schema", ...}].')
def agents_list(as_json: bool) -> None:
    """Every registered agent (entry points and AGENTSEARCH_AGENT_MODULES), as GET /v1/agents shows them."""
    from api.routes.agents import describe_registry
    from pipeline.agents.registry import AgentRegistry

    described = describe_registry(AgentRegistry.discover(get_settings().agent_modules))
    if as_json:
        click.echo(json.dumps(described, indent=2))
        return
    for entry in described:
        click.echo(f"{entry['id']:<20} {entry['stage']:<12} v{entry['version']:<4} {entry['description']}")


@main.group()
def users() -> None:
    """API users and their keys (keys are stored hashed and shown once)."""


def _user_store():
    from migrations import upgrade
    from pipeline.platform.db import Database
    from pipeline.security.users import UserStore

    settings = get_settings()
    if settings.embedded:
        settings.ensure_data_dir()
        upgrade(settings.database_url)
    return UserStore(Database(settings.database_url))


@users.command("create")
@click.argument("name")
def users_create(name: str) -> None:
    """Create a user and print its first API key, alone on the last line (it is not shown again)."""
    from pipeline.security.users import UserError

    try:
        user_id, key = _user_store().create(name)
    except UserError as exc:
        fail(str(exc))
    click.echo(f"created user {name} ({user_id}); its API key follows and will not be shown again:")
    click.echo(key)


@users.command("new-key")
@click.argument("name")
@click.option("--label", default="", help="What the key is for.")
def users_new_key(name: str, label: str) -> None:
    """Issue another key for a user (rotate: issue, switch clients, revoke the old one)."""
    from pipeline.security.users import UserError

    try:
        key = _user_store().issue_key(name, label)
    except UserError as exc:
        fail(str(exc))
    click.echo(f"new API key for {name}; it will not be shown again:")
    click.echo(key)


@users.command("revoke")
@click.argument("prefix")
def users_revoke(prefix: str) -> None:
    """Revoke a key by its prefix, as `users list` shows it."""
    from pipeline.security.users import UserError

    try:
        count = _user_store().revoke(prefix)
    except UserError as exc:
        fail(str(exc))
    if not count:
        fail(f"no live key starts with {prefix!r}")
    click.echo(f"revoked {count} key(s)")


@users.command("list")
def users_list() -> None:
    """Users with their keys' prefixes (never the keys)."""
    for user in _user_store().list():
        live = [k for k in user.keys if k.revoked_at is None]
        click.echo(f"{user.name:<24} {user.id}  {len(live)} live key(s)")
        for k in user.keys:
            state = f"revoked {k.revoked_at:%Y-%m-%d %H:%M}" if k.revoked_at else "live"
            click.echo(f"    {k.prefix}...  {state:<24} {k.label}")


@main.group()
def tools() -> None:
    """Tools agent configs may name: MCP servers (stdio or HTTP) and HTTP endpoints. Operators only."""


def _tool_store():
    from pipeline.security.registered_tools import ToolStore

    return ToolStore(_user_store().db)


def _pairs(values: tuple[str, ...], separator: str, what: str) -> dict[str, str]:
    pairs = {}
    for value in values:
        key, found, rest = value.partition(separator)
        if not found or not key.strip():
            fail(f"{what} {value!r} is not KEY{separator}VALUE")
        pairs[key.strip()] = rest.strip() if separator == ":" else rest
    return pairs


@tools.command("add")
@click.argument("name")
@click.option("--kind", type=click.Choice(["mcp", "http"]), required=True,
              help="mcp: an MCP server (the mcp agent's context_forge_tool_id); http: an endpoint URL template "
                   "(the external_enricher's endpoint).")
@click.option("--command", "command", default=None,
              help='mcp over stdio: the server\'s command line, split like a shell would ("python -m my.server").')
@click.option("--env", "env", multiple=True, help="mcp over stdio: KEY=VALUE for the server's environment "
              "(besides PATH, HOME, LOGNAME, SHELL, TERM, USER; never the worker's own). Repeatable.")
@click.option("--cwd", default=None, help="mcp over stdio: the server's working directory (absolute).")
@click.option("--url", default=None, help="mcp: the streamable HTTP endpoint; http: the URL template with "
              "{document_id}, {query}, {metadata.<key>} placeholders.")
@click.option("--header", "headers", multiple=True, help='"Name: value" sent with every call. Repeatable.')
@click.option("--server-tool", default=None, help="mcp: the tool's name on the server, when not NAME.")
@click.option("--allow-internal", is_flag=True,
              help="Calls may reach the tool's own host although it is loopback or private (never cloud metadata).")
@click.option("--description", default="", help="What the tool is for.")
@click.option("--replace", is_flag=True, help="Replace the tool registered as NAME (e.g. to rotate its secrets).")
def tools_add(name: str, kind: str, command: str | None, env: tuple[str, ...], cwd: str | None, url: str | None,
              headers: tuple[str, ...], server_tool: str | None, allow_internal: bool, description: str,
              replace: bool) -> None:
    """Register a tool under NAME; agent configs then name it and set only its arguments."""
    import shlex

    from pydantic import ValidationError

    from pipeline.security.registered_tools import RegisteredTool, ToolError

    try:
        tool = RegisteredTool(name=name, kind=kind, command=shlex.split(command) if command is not None else None,
                              env=_pairs(env, "=", "--env"), cwd=cwd, url=url,
                              headers=_pairs(headers, ":", "--header"), server_tool=server_tool,
                              allow_internal=allow_internal, description=description)
    except ValidationError as exc:
        fail("; ".join(f"{'.'.join(map(str, e['loc'])) or 'tool'}: {e['msg'].removeprefix('Value error, ')}"
                       for e in exc.errors()))
    except ValueError as exc:  # shlex: an unclosed quote
        fail(f"--command: {exc}")
    try:
        replaced = _tool_store().add(tool, replace=replace)
    except ToolError as exc:
        fail(str(exc))
    click.echo(f"{'replaced' if replaced else 'registered'} {tool.kind} tool {tool.name} ({tool.transport}"
               + (", internal host allowed" if tool.allow_internal else "") + ")")


@tools.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per tool (env and header values left out).")
def tools_list(as_json: bool) -> None:
    """The registered tools (the names of env variables and headers, never their values)."""
    listed = _tool_store().list()
    if as_json:
        click.echo(json.dumps([{**tool.listing(), "created_at": created.isoformat()} for tool, created in listed],
                              indent=2))
        return
    for tool, _created in listed:
        target = " ".join(tool.command) if tool.command is not None else tool.url
        extras = [f"server tool {tool.server_tool}"] if tool.server_tool else []
        extras += [f"env {','.join(sorted(tool.env))}"] if tool.env else []
        extras += [f"headers {','.join(sorted(tool.headers))}"] if tool.headers else []
        extras += ["internal host allowed"] if tool.allow_internal else []
        click.echo(f"{tool.name:<24} {tool.kind:<5} {tool.transport:<6} {target}"
                   + (f"  ({'; '.join(extras)})" if extras else ""))


@tools.command("remove")
@click.argument("name")
def tools_remove(name: str) -> None:
    """Remove a tool; configs naming it then fail when they run (the agent's error says so)."""
    if not _tool_store().remove(name):
        fail(f"no tool named {name!r} is registered")
    click.echo(f"removed tool {name}")


@main.group("bench")
def bench_group() -> None:
    """Benchmarks; `make bench` runs the whole suite and writes BENCHMARKS.md."""


def _bench_module(name: str):
    # The benchmarks live in the repository's bench/ directory, not in the installed package.
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    import importlib

    try:
        return importlib.import_module(f"bench.{name}")
    except ImportError as exc:
        fail(f"the benchmarks need a source checkout with bench/ ({exc})")


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
    hop = _bench_module("hop")
    try:
        result = hop.run_standalone(agents, jobs, attach)
    except RuntimeError as exc:
        fail(str(exc))
    figures = hop.public(result)
    if json_out is not None:
        json_out.write_text(json.dumps(figures) + "\n")
    click.echo(json.dumps(figures))


# Last: `python -m api.cli` must see every command group defined above.
if __name__ == "__main__":
    main()
