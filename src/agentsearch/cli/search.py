"""``agentsearch search``: submit a search job, wait for it, print its answer and write its artifacts.

Usage::

    agentsearch search "What is the notice period?" --collection handbook --agents deduplicator --out out/
    agentsearch search "Which suppliers failed audits?" --collection handbook --mode iterative --json
    agentsearch search "notice period" --collection handbook --filter '{"eq": {"key": "region", "value": "emea"}}'
    agentsearch search "What is the notice period?" --collection handbook --stream   # the answer as it is written

``print_job`` and ``write_artifacts`` serve ``agentsearch demo`` too. Exit status 1 when the job did not succeed.
"""

from __future__ import annotations

import base64
import json
import math
import sys
from pathlib import Path

import click
import httpx

from agentsearch.cli.client import ApiClient, ApiError
from agentsearch.cli.errors import fail
from agentsearch.cli.session import api_session
from agentsearch.pipeline.platform.settings import get_settings


def write_artifacts(job: dict, out_dir: Path) -> list[Path]:
    """The job's artifacts as files in ``out_dir`` (made when missing), by their names; the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for artifact in (job.get("response") or {}).get("agent_artifacts", []):
        path = out_dir / Path(artifact["filename"]).name
        path.write_bytes(base64.b64decode(artifact["data"]))
        written.append(path)
    return written


def print_job(job: dict, written: list[Path], streamed: str | None = None) -> None:
    """The job as text; ``streamed`` is the answer already printed as it arrived (not printed again unless the
    job's answer differs from it)."""
    response = job.get("response") or {}
    click.echo(f"job {job['job_id']}: {job['status']}" + (f" ({job['error']})" if job.get("error") else ""))
    if not response:
        return
    click.echo(f"\nquery:  {response['query']}")
    if response.get("search_query") != response["query"]:
        click.echo(f"search: {response['search_query']}")
    if streamed is None or streamed != response["answer"]:
        click.echo(f"\nanswer:\n  {response['answer']}")
    click.echo("\nsources:")
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
        click.echo(f"  {run['stage']:<12} {run['agent_id']:<20} {run['status']:<12} "
                   f"{run['duration_ms']:>8.1f} ms{hit}{note}")
    if written:
        click.echo("\nartifacts:")
        for path in written:
            click.echo(f"  {path} ({path.stat().st_size} bytes)")


def print_answer_stream(client: ApiClient, job_id: str) -> str | None:
    """Print the job's answer as its events bring it; the text printed (None when no answer came)."""
    text, answered = "", False
    click.echo("answer:\n  ", nl=False)
    try:
        for event, data in client.events(job_id):
            if event == "answer.delta":
                text += data["text"]
                click.echo(data["text"].replace("\n", "\n  "), nl=False)
            elif event == "answer.reset":
                text = ""
                click.echo(f"\n  (the text above is void: {data.get('reason')})\n  ", nl=False)
            elif event == "answer":
                answered = True
    except httpx.HTTPError as exc:
        # The job goes on without the stream: its answer is printed when it ends.
        click.echo(f"\n  (the answer's stream broke off: {type(exc).__name__})", nl=False)
    click.echo("\n")
    return text if answered else None


def parse_stage_timeouts(given: tuple[str, ...]) -> dict[str, float] | None:
    """``("pre_search=2", "response=10")`` as the request's ``stage_timeouts``; the stage names and the bounds are
    the API's to check (its 422 names the stage at fault), the form is checked here: a number of seconds, and a
    finite one (``float`` reads ``nan`` and ``inf``, which no JSON body can carry)."""
    budgets: dict[str, float] = {}
    for item in given:
        stage, sep, seconds = item.partition("=")
        try:
            if not sep or not stage.strip():
                raise ValueError
            budgets[stage.strip()] = float(seconds)
            if not math.isfinite(budgets[stage.strip()]):
                raise ValueError
        except ValueError:
            fail(f"--stage-timeout {item!r}: expected STAGE=SECONDS, e.g. response=10")
    return budgets or None


@click.command()
@click.argument("query")
@click.option("--collection", "collection_name", required=True,
              help="Collection name; TEAM/NAME for a team's (a plain name: yours, else the one team's of that name).")
@click.option("--agents", default=None, help="Comma-separated agent ids to run with default configs for this job.")
@click.option("--top-k", type=int, default=None)
@click.option("--cot", is_flag=True, help="Include chain-of-thought steps.")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait for the job to finish.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Write artifacts to this directory.")
@click.option("--json", "as_json", is_flag=True, help="Print the job as JSON.")
@click.option("--mode", type=click.Choice(["single", "iterative"]), default=None,
              help="iterative: evaluate, refine and search again until the target or the budget (agentic mode).")
@click.option("--filter", "filter_json", default=None,
              help='Metadata filter as JSON (docs/filters.md), e.g. \'{"eq": {"key": "region", "value": "emea"}}\'.')
@click.option("--stream", "stream", is_flag=True,
              help="Print the answer as it is written (the job's events), then the sources and artifacts.")
@click.option("--stage-timeout", "stage_timeout", multiple=True, metavar="STAGE=SECONDS",
              help="This job's budget for a stage (pre_search, post_search, response), over the collection's; "
                   "repeat for several (docs/stage-deadlines.md).")
def search(query: str, collection_name: str, agents: str | None, top_k: int | None, cot: bool, wait: bool,
           out: Path | None, as_json: bool, mode: str | None, filter_json: str | None, stream: bool,
           stage_timeout: tuple[str, ...]) -> None:
    """Submit a search job and (by default) wait for its answer."""
    settings = get_settings()
    stage_timeouts = parse_stage_timeouts(stage_timeout)
    if stream and (as_json or not wait):
        fail("--stream prints the answer as it arrives: it goes with neither --json nor --no-wait")
    streamed = None
    if not wait and not settings.api_url:
        fail("--no-wait needs a running API (AGENTSEARCH_API_URL): an in-process one stops when this command ends")
    agent_list = [a.strip() for a in agents.split(",") if a.strip()] if agents is not None else None
    try:
        # Sent as given: the API checks it and names the path at fault (`body.filter.and.1.range.gt: ...`).
        search_filter = json.loads(filter_json) if filter_json is not None else None
    except json.JSONDecodeError as exc:
        fail(f"--filter is not JSON: {exc}")
    try:
        with api_session(settings) as client:
            collection = client.find_collection(collection_name)
            if collection is None:
                fail(f"no collection named {collection_name!r}; create it with `agentsearch ingest`")
            job_id = client.submit(collection["id"], query, agents=agent_list, top_k=top_k, cot=cot or None,
                                   mode=mode, filter=search_filter, stage_timeouts=stage_timeouts)
            if not wait:
                click.echo(job_id)
                return
            if stream:
                streamed = print_answer_stream(client, job_id)
            job = client.wait_job(job_id)
    except (ApiError, TimeoutError) as exc:
        fail(str(exc))
    written = write_artifacts(job, out) if out else []
    if as_json:
        click.echo(json.dumps(job, indent=2, default=str))
    else:
        print_job(job, written, streamed)
    if job["status"] != "succeeded":
        sys.exit(1)
