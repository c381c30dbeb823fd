"""``agentsearch search``: submit a search job, wait for it, print its answer and write its artifacts.

Usage::

    agentsearch search "What is the notice period?" --collection handbook --agents deduplicator --out out/
    agentsearch search "Which suppliers failed audits?" --collection handbook --mode iterative --json

``print_job`` and ``write_artifacts`` serve ``agentsearch demo`` too. Exit status 1 when the job did not succeed.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import click

from cli.client import ApiError
from cli.errors import fail
from cli.session import api_session
from pipeline.platform.settings import get_settings


def write_artifacts(job: dict, out_dir: Path) -> list[Path]:
    """The job's artifacts as files in ``out_dir`` (made when missing), by their names; the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for artifact in (job.get("response") or {}).get("agent_artifacts", []):
        path = out_dir / Path(artifact["filename"]).name
        path.write_bytes(base64.b64decode(artifact["data"]))
        written.append(path)
    return written


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


@click.command()
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
