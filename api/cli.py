"""The ``agentsearch`` command line.

    agentsearch demo                                   ingest a sample corpus and run one search job end to end
    agentsearch api | worker | migrate                 run the services
    agentsearch ingest FILE --collection NAME          JSON Lines documents (id, title, text, metadata)
    agentsearch search "QUERY" --collection NAME [--agents a,b] [--wait] [--out DIR]
    agentsearch eval retrieval|answers ...             benchmark retrieval (BEIR) or answers (gold spans)
    agentsearch agents list [--json]                   the registered agents

``ingest`` and ``search`` talk to the API at AGENTSEARCH_API_URL; unset, they start one in this process.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from pipeline.settings import get_settings

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

    settings = get_settings()
    uvicorn.run("api.app:create_app", factory=True, host=host or settings.api_host, port=port or settings.api_port)


@main.command()
@click.option("--queues", default="celery,artifacts", show_default=True, help="Queues to consume.")
@click.option("--concurrency", type=int, default=None, help="Worker processes (default AGENTSEARCH_WORKER_CONCURRENCY).")
@click.option("--loglevel", default="INFO", show_default=True)
@click.option("--beat", is_flag=True, help="Also run the periodic scheduler (the job reaper); in one worker only.")
def worker(queues: str, concurrency: int | None, loglevel: str, beat: bool) -> None:
    """Run a prefork Celery worker (distributed mode)."""
    settings = get_settings()
    if settings.embedded:
        fail("the worker needs a shared broker: set AGENTSEARCH_BROKER_URL (e.g. redis://127.0.0.1:6379/0); "
             "in embedded mode `agentsearch api` runs the workers itself")
    from worker.app import app as celery_app

    celery_app.worker_main(
        ["worker", "--pool=prefork", f"--concurrency={concurrency or settings.worker_concurrency}",
         f"--queues={queues}", f"--loglevel={loglevel}", "--task-events",
         *(["--beat", f"--schedule={settings.ensure_data_dir() / 'celerybeat-schedule'}"] if beat else [])]
    )


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
def search(query: str, collection_name: str, agents: str | None, top_k: int | None, cot: bool, wait: bool,
           out: Path | None, as_json: bool) -> None:
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
            job_id = client.submit(collection["id"], query, agents=agent_list, top_k=top_k, cot=cot or None)
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
    from api.client import api_session, write_artifacts

    settings = get_settings()
    documents = _read_documents(SAMPLE_CORPUS)
    mode = "distributed" if not settings.embedded else "embedded (SQLite, Milvus Lite, in-process Celery)"
    click.echo(f"mode: {mode}; data dir: {settings.data_dir.resolve()}")
    with api_session(settings) as client:
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
        job = client.wait_job(job_id)
    print_job(job, write_artifacts(job, out))
    if job["status"] != "succeeded":
        sys.exit(1)


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
    from pipeline.evaluation import (ensure_corpus_indexed, load_beir_corpus, load_beir_queries, load_qrels,
                                     run_agents_eval, run_retrieval_eval, score_run)
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
    from pipeline.answer_eval import load_gold_answers, run_answer_eval
    from pipeline.evaluation import ensure_corpus_indexed, load_beir_corpus, load_beir_queries
    from pipeline.llm import LLMClient
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


if __name__ == "__main__":
    main()
