"""``agentsearch demo``: the sample corpus ingested, nine agents configured, one search job run end to end.

Usage::

    agentsearch demo --out demo-out/      # embedded by default: SQLite, Milvus Lite, Celery threads in-process

It goes through the API and Celery as any client would; ``make demo`` runs it on a fresh clone.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from agentsearch.cli.client import ApiClient, ApiError
from agentsearch.cli.documents import documents_or_fail
from agentsearch.cli.errors import fail
from agentsearch.cli.search import print_job, write_artifacts
from agentsearch.cli.session import api_session
from agentsearch.pipeline.platform.settings import get_settings

PACKAGE = Path(__file__).resolve().parents[1]
SAMPLE_CORPUS = PACKAGE / "examples" / "sample_corpus.jsonl"
DEMO_QUERY = "What was Northwind Energy's revenue in Q4 2025, and how did it compare with Q4 2024?"
DEMO_AGENTS: list[dict[str, Any]] = [
    {"agent_id": "language_detector", "priority": 0},
    {
        "agent_id": "acronym_resolver",
        "priority": 10,
        "config": {"acronyms": {"PPA": "power purchase agreement", "LCOE": "levelized cost of energy",
                                "Q4": "fourth quarter"}},
    },
    {"agent_id": "deduplicator", "priority": 0, "config": {"threshold": 0.5}},
    {"agent_id": "executive_summary", "priority": 0, "config": {"max_words": 120}},
    {"agent_id": "email_draft", "priority": 10},
    {"agent_id": "pptx_generator", "priority": 20},
    {"agent_id": "pdf_report", "priority": 30},
    {"agent_id": "chart_generator", "priority": 40},
    {"agent_id": "audio_summary", "priority": 50},
]


@click.command()
@click.option("--out", type=click.Path(path_type=Path), default=Path("demo-out"), show_default=True)
@click.option("--query", default=DEMO_QUERY, show_default=True)
def demo(out: Path, query: str) -> None:
    """Ingest the sample corpus, configure agents, run one search job through the API and Celery."""
    settings = get_settings()
    documents = documents_or_fail(SAMPLE_CORPUS)
    mode = "distributed" if not settings.embedded else "embedded (SQLite, Milvus Lite, in-process Celery)"
    click.echo(f"mode: {mode}; data dir: {settings.data_dir.resolve()}")
    try:
        with api_session(settings) as client:
            job = _run_demo(client, documents, query)
    except ApiError as exc:
        fail(str(exc))
    print_job(job, write_artifacts(job, out))
    click.echo(f"\n{console_hint(settings)}")
    if job["status"] != "succeeded":
        sys.exit(1)


def console_hint(settings) -> str:
    """Where to see this demo in the web console. In embedded mode the demo's API lived only as long as the
    command, so it says how to serve the same data (and sign in as the user the demo ran as)."""
    if settings.api_url:
        return f"web console: {settings.api_url.rstrip('/')}/ (sign in with the key in AGENTSEARCH_API_KEY)"
    return ("web console: run `.venv/bin/agentsearch api`, open "
            f"http://{settings.api_host}:{settings.api_port}/ and sign in with a key of the user this demo ran as, "
            "from `.venv/bin/agentsearch users new-key default`")


def _run_demo(client: ApiClient, documents: list[dict], query: str) -> dict:
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
